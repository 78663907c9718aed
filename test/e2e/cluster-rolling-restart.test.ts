import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { startCluster, type Cluster } from '../helpers/cluster.ts'
import { CountingProxy } from '../helpers/counting-proxy.ts'
import { DEMO_MAIN } from '../helpers/built.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import type { GatewayProcess } from '../helpers/process.ts'
import { legacyTask, next, RawSession } from '../helpers/raw-session.ts'
import { SHARED_KINDS } from '../helpers/shared-store.ts'
import { until } from '../helpers/until.ts'
import type { GatewayStore, TaskRecord } from '../../src/store/types.ts'

type Json = Record<string, unknown>

const TOOL = 'ev__simulate-research-query'
const TASKS = 50
/**
 * The tasks' TTL: longer than the whole test on a loaded machine, so a task is read after the deploy because it
 * survived it, never found gone because its TTL (counted from creation) ran out while the deploy went on.
 */
const TASK_TTL = 600_000

/**
 * A rolling deploy: three gateway processes on one shared store (Redis, then PostgreSQL) behind a round-robin
 * balancer, in front of @modelcontextprotocol/server-everything over Streamable HTTP, are replaced one after another
 * (SIGTERM, then a new process in its place) while 50 tasks run as the server's own tasks, half of them waiting for
 * the user to answer a question, 10 more as plain calls of an upstream that replays its call streams, and 10 as
 * tasks of a 2026-07-28 upstream with the tasks extension (the gateway itself, in front of the demo server). Every
 * process hands its tasks over as it stops; every task completes with the upstream's real result, each ran once
 * upstream, and the questions asked before the deploy are answered after it.
 */
describe.each(SHARED_KINDS)('a rolling restart of all three processes on %s while 50 tasks run', (kind) => {
  let everything: StartedUpstream
  let replayable: StartedUpstream
  let proxy: CountingProxy
  let replayProxy: CountingProxy
  let demo: StartedUpstream
  let modern: RunningGateway
  let modernProxy: CountingProxy
  let cluster: Cluster
  /** The processes' store, read by the test: what each task records for the process that takes it over. */
  let store: GatewayStore
  const stored = async (id: string): Promise<TaskRecord | null> => await store.tasks.get(id, Date.now())

  beforeAll(async () => {
    ;[everything, replayable] = await Promise.all([
      startUpstream('test/fixtures/everything-http.mjs', [], { readyTimeoutMs: 60_000 }),
      startUpstream('test/fixtures/replayable-upstream.ts', ['--port', '0']),
    ])
    // In front of the demo server over Streamable HTTP: each question comes on the stream of its own call.
    demo = await startUpstream(DEMO_MAIN, ['--http', '0'])
    modern = await startGateway({ upstreams: [{ name: 'demo', transport: 'streamable-http', url: demo.url }], tasks: { decide: 'always', pollInterval: '100ms' } })
    proxy = new CountingProxy(everything.url)
    replayProxy = new CountingProxy(replayable.url)
    modernProxy = new CountingProxy(modern.url)
    await Promise.all([proxy.listen(), replayProxy.listen(), modernProxy.listen()])
    cluster = await startCluster(`
logging: { level: info }
tasks: { pollInterval: 100ms, ownerLease: 2s }
upstreams:
  - name: ev
    transport: streamable-http
    url: ${JSON.stringify(proxy.url)}
    timeouts: { connect: 60s }
    maxConcurrentCalls: 100
  - name: rp
    transport: streamable-http
    url: ${JSON.stringify(replayProxy.url)}
  - { name: m, transport: streamable-http, url: ${JSON.stringify(modernProxy.url)}, era: auto }
`, { store: kind })
    store = await cluster.store.open()
  }, 90_000)

  afterAll(async () => {
    await store?.close()
    await cluster?.close()
    await proxy?.close()
    await replayProxy?.close()
    await modernProxy?.close()
    await modern?.close()
    await demo?.close()
    await everything?.close()
    await replayable?.close()
  })

  it('fails no task: each completes once upstream with its real report, questions asked before it answered after it', { timeout: 120_000 }, async () => {
    const elicitation = { elicitation: { form: {} } }
    const sessions = await Promise.all(Array.from({ length: 10 }, async () => await RawSession.open(cluster.url, elicitation)))
    // First 10 tasks the 2026-07-28 upstream runs as its own, half of them asking a question.
    const modernTasks = await Promise.all(Array.from({ length: 10 }, async (_, i) => {
      const session = sessions[i]!
      const asks = i % 2 === 0
      const id = asks
        ? await legacyTask(session, 'm__demo__ask_user', { message: `deploy question ${i}` }, TASK_TTL)
        : await legacyTask(session, 'm__demo__slow', { duration: 15_000, steps: 3 }, TASK_TTL)
      return { i, session, asks, id }
    }))
    await until('every 2026-07-28 upstream task recorded, and each question asked', async () => {
      const followed = await Promise.all(modernTasks.map(async (task) => await stored(task.id)))
      return followed.every((task, n) => task?.resume?.kind === 'native' && (!modernTasks[n]!.asks || task.status === 'input_required')) ? true : undefined
    }, { timeoutMs: 60_000 })
    const tasks = await Promise.all(Array.from({ length: TASKS }, async (_, i) => {
      const session = sessions[i % sessions.length]!
      const ambiguous = i % 2 === 0
      return { i, session, ambiguous, id: await legacyTask(session, TOOL, { topic: `deploy ${i}`, ambiguous }, TASK_TTL) }
    }))
    // And 10 plain calls of an upstream that replays its call streams, running through the deploy.
    const calls = await Promise.all(Array.from({ length: 10 }, async (_, i) => {
      const session = sessions[i]!
      return { i, session, id: await legacyTask(session, 'rp__slow_report', { topic: `deploy call ${i}`, ms: 6000, steps: 3 }, TASK_TTL) }
    }))
    // Every task runs upstream, recorded where; every question is asked (and stored for its client). A task that
    // asks nothing may be over already on a loaded machine (its record is cleared as it ends): it is checked below.
    await until('every task recording its upstream task', async () => {
      const records = await Promise.all(tasks.map(async (task) => await stored(task.id)))
      const streams = await Promise.all(calls.map(async (call) => await stored(call.id)))
      const asked = records.every((task, n) => {
        const recorded = task?.resume != null
        return tasks[n]!.ambiguous ? recorded && task?.status === 'input_required' : recorded || task?.status === 'completed'
      })
      return asked && streams.every((call) => call?.resume?.kind === 'stream' || call?.status === 'completed') ? true : undefined
    }, { timeoutMs: 60_000 })

    const stopped: GatewayProcess[] = []
    for (let index = 0; index < cluster.processes.length; index++) {
      stopped.push(cluster.processes[index]!)
      await cluster.replace(index)
    }
    const handedOver = stopped.map((process) => {
      const line = process.lines.find((l) => l.includes('"handed running tasks over"'))
      return line === undefined ? 0 : (JSON.parse(line) as Json).handedOver as number
    })
    // Each stopping process handed its running tasks over (the later ones also those taken from the earlier ones);
    // a task waiting for its answer runs through the whole deploy, so it was handed over at least once.
    expect(handedOver[0]).toBeGreaterThan(0)
    for (const task of tasks.filter((t) => t.ambiguous)) {
      const timeline = await store.tasks.timeline(task.id)
      expect(timeline.filter((event) => event.type === 'claimed').length, `task ${task.i}`).toBeGreaterThan(0)
    }

    // The questions asked before the deploy reach their clients now, through whichever process, and are answered.
    await Promise.all(tasks.filter((task) => task.ambiguous).map(async (task) => {
      const controller = new AbortController()
      try {
        const stream = await task.session.stream({ taskResult: task.id }, controller.signal)
        const question = await next(stream, (m) => m.method === 'elicitation/create')
        await (await task.session.post({ jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { interpretation: `answer ${task.i}` } } })).text()
      } finally {
        controller.abort()
      }
    }))
    await Promise.all(modernTasks.filter((task) => task.asks).map(async (task) => {
      const controller = new AbortController()
      try {
        const stream = await task.session.stream({ taskResult: task.id }, controller.signal)
        const question = await next(stream, (m) => m.method === 'elicitation/create')
        expect((question.params as Json).message).toBe(`deploy question ${task.i}`)
        await (await task.session.post({ jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { name: `after ${task.i}` } } })).text()
      } finally {
        controller.abort()
      }
    }))

    for (const task of tasks) {
      const final = await task.session.waitFor(task.id, ['completed', 'failed', 'cancelled'])
      expect(final.status, `task ${task.i}: ${JSON.stringify(final)}`).toBe('completed')
      const answer = await task.session.request('tasks/result', { taskId: task.id })
      expect(answer.result, `task ${task.i}: ${JSON.stringify(answer)}`).toBeDefined()
      const report = JSON.stringify(answer.result)
      expect(report).toContain(task.ambiguous ? `deploy ${task.i} (answer ${task.i})` : `Research Report: deploy ${task.i}`)
    }
    for (const call of calls) {
      expect((await call.session.waitFor(call.id, ['completed', 'failed', 'cancelled'])).status, `call ${call.i}`).toBe('completed')
      expect(JSON.stringify((await call.session.request('tasks/result', { taskId: call.id })).result)).toContain(`report on deploy call ${call.i} after 3 steps`)
    }
    for (const task of modernTasks) {
      expect((await task.session.waitFor(task.id, ['completed', 'failed', 'cancelled'])).status, `2026 task ${task.i}`).toBe('completed')
      const text = task.asks ? `Hello, after ${task.i}!` : 'slow finished: 3 steps in 15000 ms'
      expect((await task.session.request('tasks/result', { taskId: task.id })).result).toMatchObject({ content: [{ text }] })
    }
    expect(modernProxy.count('tools/call demo__ask_user') + modernProxy.count('tools/call demo__slow')).toBe(modernTasks.length)
    expect(modernProxy.count('tasks/cancel')).toBe(0)
    expect(replayProxy.count('tools/call slow_report')).toBe(calls.length)
    expect(replayProxy.count('notifications/cancelled')).toBe(0)
    expect(proxy.count('tools/call simulate-research-query')).toBe(TASKS)
    expect(proxy.count('tasks/cancel')).toBe(0)
    for (const process of [...stopped, ...cluster.processes]) {
      expect(process.lines.filter((line) => /"level":(50|60)/.test(line) || /unhandled|uncaught/i.test(line))).toEqual([])
    }
  })
})
