import { randomUUID } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { CountingProxy } from '../helpers/counting-proxy.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { legacyTask, next, RawSession } from '../helpers/raw-session.ts'
import { purge, REDIS_URL, STATE_SECRET } from '../helpers/redis.ts'
import { expectCompleted } from '../helpers/resume.ts'
import { until } from '../helpers/until.ts'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'

type Json = Record<string, unknown>

const TOOL = 'ev__simulate-research-query'
const ADMIN_TOKEN = 'handover-admin-token'

/**
 * A gateway that shuts down (SIGTERM, a deploy) while tasks of @modelcontextprotocol/server-everything run as
 * the server's own tasks: it hands them over at once instead of waiting for them and failing them, and leaves
 * the upstream session open; the next process on a SQLite file, or another process on Redis, finishes them.
 *
 * The tests run side by side (most of their time is spent waiting on the upstream's task stages), each on a file
 * or key prefix of its own; on the shared upstream each counts its own calls, by their arguments. None of them
 * cancels anything upstream.
 */
describe('handing running tasks over on shutdown', () => {
  let everything: StartedUpstream
  let proxy: CountingProxy
  const running: RunningGateway[] = []

  beforeAll(async () => {
    everything = await startUpstream('test/fixtures/everything-http.mjs', [], { readyTimeoutMs: 60_000 })
    proxy = new CountingProxy(everything.url)
    await proxy.listen()
  }, 90_000)

  afterAll(async () => {
    await Promise.all(running.map(async (gw) => await gw.close()))
    await proxy?.close()
    await everything?.close()
  })

  function config (store: Json): Json {
    return {
      store,
      admin: { port: 0, tokenSha256: sha256Hex(ADMIN_TOKEN) },
      // Long enough that a task left to run out its grace would finish: a handed-over task does not wait for it.
      server: { shutdownGrace: '60s', stateSecret: STATE_SECRET },
      tasks: { pollInterval: '50ms', ownerLease: '2s' },
      upstreams: [{
        name: 'ev',
        transport: 'streamable-http',
        url: proxy.url,
        timeouts: { connect: '60s' },
        // A plain call that is not resumed (its stream could be replayed otherwise): it waits for the grace.
        toolSettings: { 'trigger-long-running-operation': { resume: 'off' } },
      }],
    }
  }

  async function start (store: Json): Promise<RunningGateway> {
    const gw = await startGateway(config(store))
    running.push(gw)
    return gw
  }

  /** Starts `count` tasks through `gw` and waits until each records the upstream task it runs as. */
  async function tasksOn (gw: RunningGateway, count: number, topic: string): Promise<{ session: RawSession, taskIds: string[] }> {
    const session = await RawSession.open(gw.url)
    const taskIds = await Promise.all(Array.from({ length: count }, async (_, i) => await legacyTask(session, TOOL, { topic: `${topic} ${i}` })))
    await until('every task recording its upstream task', async () => {
      const tasks = await Promise.all(taskIds.map(async (id) => await gw.gateway.store.tasks.get(id, Date.now())))
      return tasks.every((task) => task?.resume != null) ? true : undefined
    })
    return { session, taskIds }
  }

  async function expectReports (session: RawSession, taskIds: string[], topic: string): Promise<void> {
    await expectCompleted(session, taskIds, (i) => `Research Report: ${topic} ${i}`)
  }

  /** Calls of the server's task tool whose topic starts with `topic` (the topics of one test). */
  function researchCalls (topic: string): number {
    return proxy.countWhere('tools/call simulate-research-query', (args) => String(args.topic).startsWith(`${topic} `))
  }

  it.concurrent('on SQLite, the next process on the file finishes what the stopped one handed over', { timeout: 90_000 }, async () => {
    const store = { kind: 'sqlite', path: join(mkdtempSync(join(tmpdir(), 'gw-handover-')), 'gateway.db') }
    const first = await start(store)
    const { session, taskIds } = await tasksOn(first, 3, 'sqlite')
    // What a restart costs, before one: the server's task tool is resumed, every other tool's running task lost.
    const survival = await first.gateway.admin!.inject({ method: 'GET', url: '/admin/survival', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    expect(survival.json<Json>()).toMatchObject({
      handedOver: 0,
      upstreams: [{
        upstream: 'ev',
        transport: 'streamable-http',
        resume: 'auto',
        resumable: ['simulate-research-query'],
        rerun: [],
        others: 'resumed if the upstream replays the call stream (SSE event ids), else lost',
        // Whatever the tool: a queued task's call never left the process.
        queued: 'started by the process that takes them over: their calls were never sent upstream',
      }],
    })
    const recorded = await Promise.all(taskIds.map(async (id) => await first.gateway.store.tasks.get(id, Date.now())))
    const upstreamSessions = new Set(recorded.map((task) => task?.resume?.kind === 'unsent' ? undefined : task?.resume?.sessionId))
    await first.close()
    expect(first.logs().find((line) => line.msg === 'handed running tasks over')).toMatchObject({ handedOver: 3 })
    expect(first.gateway.tasks.handedOver).toBe(3)
    expect(first.logs().some((line) => line.msg === 'shutdown grace over: cancelling in-flight requests and tasks')).toBe(false)
    // The upstream session that holds the upstream tasks was left open (no DELETE), and no task was cancelled.
    expect(upstreamSessions.size).toBe(1)
    expect([...upstreamSessions].filter((id) => proxy.deleted.has(String(id)))).toEqual([])
    const second = await start(store)
    await expectReports(session.on(second.url), taskIds, 'sqlite')
    expect(researchCalls('sqlite')).toBe(3)
    expect(proxy.count('tasks/cancel')).toBe(0)
    expect(second.logs().find((line) => line.msg === 'recovered tasks interrupted by a restart')).toMatchObject({ resumed: 3, rerun: 0, failed: 0 })
  })

  it.concurrent('hands over a task whose upstream task is still being recorded as the shutdown reaches the handover', { timeout: 90_000 }, async () => {
    const store = { kind: 'sqlite', path: join(mkdtempSync(join(tmpdir(), 'gw-handover-held-')), 'gateway.db') }
    const first = await start(store)
    // The store write that records the task's upstream task is held until the shutdown has begun its handover.
    const tasks = first.gateway.store.tasks
    const transition = tasks.transition.bind(tasks)
    let recording!: () => void
    const recordingStarted = new Promise<void>((resolve) => { recording = resolve })
    let release!: () => void
    const released = new Promise<void>((resolve) => { release = resolve })
    tasks.transition = async (...args: Parameters<typeof transition>) => {
      if (args[3].resume != null) {
        recording()
        await released
      }
      return await transition(...args)
    }
    const session = await RawSession.open(first.url)
    const taskId = await legacyTask(session, TOOL, { topic: 'held 0' })
    await recordingStarted
    const closed = first.close()
    await until('the shutdown to reach the handover', () => first.logs().some((line) => line.msg === 'shutdown step' && line.step === 'hand resumable and queued tasks over') ? true : undefined)
    release()
    await closed
    // Handed over at once (a task left to its grace would have finished on the stopped process, handing nothing over).
    expect(first.gateway.tasks.handedOver).toBe(1)
    const second = await start(store)
    await expectReports(session.on(second.url), [taskId], 'held')
  })

  it.concurrent('hands a task still waiting for a call slot over at once, without waiting for the slot through the grace', { timeout: 90_000 }, async () => {
    const store = { kind: 'sqlite', path: join(mkdtempSync(join(tmpdir(), 'gw-handover-queued-')), 'gateway.db') }
    const base = config(store)
    // One call at a time: the task waits behind a plain call that ends during the grace.
    const upstream = { ...(base.upstreams as Json[])[0], maxConcurrentCalls: 1 }
    const first = await startGateway({ ...base, server: { shutdownGrace: '8s' }, upstreams: [upstream] })
    running.push(first)
    const session = await RawSession.open(first.url, { elicitation: { form: {} } })
    await legacyTask(session, 'ev__trigger-long-running-operation', { duration: 2, steps: 2 })
    const holding = (args: Record<string, unknown>): boolean => args.duration === 2 && args.steps === 2
    await until('the plain call to hold the upstream\'s one call slot', () => proxy.countWhere('tools/call trigger-long-running-operation', holding) > 0 ? true : undefined)
    // It would ask a question once it runs, and wait for the answer past the grace.
    const taskId = await legacyTask(session, TOOL, { topic: 'queued 0', ambiguous: true })
    await until('the task to wait for the call slot', async () => String(((await session.request('tasks/get', { taskId })).result as Json).statusMessage ?? '').startsWith('queued') ? true : undefined)
    await first.close()
    // Handed over before the grace (its call was never sent): the grace had only the plain call to wait for.
    expect(first.logs().find((line) => line.msg === 'handed running tasks over')).toMatchObject({ handedOver: 1 })
    expect(first.logs().some((line) => line.msg === 'shutdown grace over: cancelling in-flight requests and tasks')).toBe(false)
    expect(first.gateway.tasks.handedOver).toBe(1)
    // The next process on the file starts it: its question is answered through that process.
    const second = await start(store)
    const viaSecond = session.on(second.url)
    const controller = new AbortController()
    const stream = await viaSecond.stream({ taskResult: taskId }, controller.signal)
    const question = await next(stream, (m) => m.method === 'elicitation/create')
    await viaSecond.post({ jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { interpretation: 'after the grace' } } })
    controller.abort()
    await expectReports(viaSecond, [taskId], 'queued')
  })

  it.concurrent('on Redis, another process takes the tasks over at once and finishes them', { timeout: 90_000 }, async () => {
    const prefix = `mcpgw-handover:${randomUUID()}:`
    const store = { kind: 'redis', url: REDIS_URL, prefix }
    try {
      const [a, b] = await Promise.all([start(store), start(store)])
      const { session, taskIds } = await tasksOn(a, 3, 'redis')
      // A plain call of the same server that is not resumed (resume: off for it) runs out its grace on A.
      const slow = await legacyTask(session, 'ev__trigger-long-running-operation', { duration: 3, steps: 3 })
      await session.waitFor(slow, ['working'])
      const closed = a.close()
      // While A waits for the plain call, it is draining and says what it handed over at once.
      const readyz = await until('A to say it handed its resumable tasks over', async () => {
        const body = (await a.app.inject({ method: 'GET', url: '/readyz' })).json<Json>()
        return body.handedOver === 3 ? body : undefined
      })
      expect(readyz.status).toBe('draining')
      await closed
      expect(a.logs().some((line) => line.msg === 'shutdown grace over: cancelling in-flight requests and tasks')).toBe(false)
      await expectReports(session.on(b.url), taskIds, 'redis')
      // The plain call finished on A within its grace.
      expect(JSON.stringify((await session.on(b.url).request('tasks/result', { taskId: slow })).result)).toContain('Long running operation completed')
      expect(researchCalls('redis')).toBe(3)
      const taken = b.logs().find((line) => line.msg === 'took over the tasks of a lost gateway process')
      expect(taken).toMatchObject({ resumed: 3, rerun: 0, failed: 0 })
      const timeline = await b.gateway.store.tasks.timeline(taskIds[0]!)
      expect(timeline.filter((event) => event.type === 'claimed').map((event) => (event as { process: string }).process)).toEqual([`${a.gateway.processId}~handover`, b.gateway.processId])
    } finally {
      await purge(prefix)
    }
  })

  it.concurrent('a process declared lost while it still runs stops waiting for the tasks another one resumed, and cancels nothing', { timeout: 90_000 }, async () => {
    const prefix = `mcpgw-stalled:${randomUUID()}:`
    const store = { kind: 'redis', url: REDIS_URL, prefix }
    try {
      const cancels = proxy.count('tasks/cancel')
      const [a, b] = await Promise.all([start(store), start(store)])
      const { session, taskIds } = await tasksOn(a, 2, 'stalled')
      // What B's lease scan does once A's lease has lapsed (A stalled longer than tasks.ownerLease), while A still runs.
      expect(await b.gateway.tasks.adoptOrphans(a.gateway.processId)).toEqual({ resumed: 2, rerun: 0, started: 0, failed: 0 })
      await expectReports(session.on(b.url), taskIds, 'stalled')
      expect(researchCalls('stalled')).toBe(2)
      expect(proxy.count('tasks/cancel') - cancels).toBe(0)
      for (const taskId of taskIds) {
        // B stored the outcome; A, told that B resumed the task, stopped waiting and stored nothing.
        const moves = (await b.gateway.store.tasks.timeline(taskId)).filter((event) => event.type === 'status' && event.status === 'completed')
        expect(moves.map((event) => (event as { process?: string }).process)).toEqual([b.gateway.processId])
      }
      expect(a.logs().filter((line) => line.msg === 'task finished')).toEqual([])
    } finally {
      await purge(prefix)
    }
  })
})
