import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { CountingProxy } from '../helpers/counting-proxy.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { loggedLine, startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { legacyTask, next, RawSession } from '../helpers/raw-session.ts'
import { STATE_SECRET } from '../helpers/redis.ts'
import { SHARED_KINDS, sharedStore } from '../helpers/shared-store.ts'
import { expectCompleted, recordedInSqlite, recordedInStore, startPair } from '../helpers/resume.ts'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import type { GatewayStore } from '../../src/store/types.ts'

type Json = Record<string, unknown>

const ADMIN_TOKEN = 'resume26-admin-token'

/**
 * Tasks a 2026-07-28 upstream runs as its own (tasks extension) outlive the gateway process that started them:
 * the task records the upstream's task id, and the process that adopts the task follows it with tasks/get. The
 * upstream is the gateway itself in the 2026-07-28 era, deciding to run every call it may as a task, in front of
 * the demo server; it keeps its tasks while the gateway processes in front of it die.
 *
 * The stores run side by side (each on its own key prefix or schema, its tests one after another), and so does
 * the SQLite file: most of their time is spent waiting on leases and upstream tasks. They share the upstream and
 * its counting proxy, so each counts only its own calls (by their arguments) and cancels (by their upstream task).
 */
describe('tasks of a 2026-07-28 upstream survive the death of their gateway process', () => {
  let upstream: RunningGateway
  let proxy: CountingProxy

  const upstreamYaml = (url = proxy.url): string => `
upstreams:
  - { name: u, transport: streamable-http, url: ${JSON.stringify(url)}, era: auto }
`

  beforeAll(async () => {
    upstream = await startGateway({ upstreams: [demoStdio()], tasks: { decide: 'always', pollInterval: '50ms' } })
    proxy = new CountingProxy(upstream.url)
    await proxy.listen()
  })

  afterAll(async () => {
    await proxy?.close()
    await upstream?.close()
  })

  /** The upstream task ids the tasks record (their owner follows them there). */
  async function upstreamTaskIds (store: GatewayStore, taskIds: readonly string[]): Promise<string[]> {
    const records = await Promise.all(taskIds.map(async (id) => await store.tasks.get(id, Date.now())))
    return records.map((task) => task?.resume?.kind === 'native' ? task.resume.upstreamTaskId : '')
  }

  describe.concurrent.each(SHARED_KINDS)('on %s', (kind) => {
    const shared = sharedStore(kind, 'mcpgw-resume26')
    const processes: GatewayProcess[] = []
    /** Tells this store's calls from the other's on the shared upstream: their durations differ by it. */
    const offset = SHARED_KINDS.indexOf(kind) * 10
    /** The processes' store, read by the test: what each task records for the process that adopts it. */
    let store: GatewayStore
    let file: string

    beforeAll(async () => {
      store = await shared.open()
      file = writeConfig(`
store: ${shared.yaml}
server: { stateSecret: ${JSON.stringify(STATE_SECRET)} }
tasks: { pollInterval: 50ms, ownerLease: 2s }
${upstreamYaml()}`)
    })

    afterEach(async () => { await stopAll(processes) })

    afterAll(async () => {
      await stopAll(processes)
      await store?.close()
      await shared.drop()
    })

    it.sequential('SIGKILL of the owner mid-task: every task completes with its real result, none run twice upstream', { timeout: 120_000 }, async () => {
      const [a, b] = await startPair(file, processes)
      const session = await RawSession.open(a.url)
      const durations = Array.from({ length: 6 }, (_, i) => 4000 + i * 100 + offset)
      const taskIds = await Promise.all(durations.map(async (duration) => await legacyTask(session, 'u__demo__slow', { duration, steps: 4 })))
      await recordedInStore(store, taskIds, 'native')
      a.child.kill('SIGKILL')
      await a.exited
      await expectCompleted(session.on(b.url), taskIds, (i) => `slow finished: 4 steps in ${durations[i]!} ms`)
      expect(proxy.countWhere('tools/call demo__slow', (args) => durations.includes(Number(args.duration)))).toBe(6)
      expect(b.lines.some((line) => line.includes('resuming the upstream work of a task another gateway process ran'))).toBe(true)
    })

    it.sequential('a question the upstream task asked before the kill is answered through the process that adopted it', { timeout: 120_000 }, async () => {
      const [a, b] = await startPair(file, processes)
      const session = await RawSession.open(a.url, { elicitation: { form: {} } })
      const message = `Who adopts me on ${kind}?`
      const taskId = await legacyTask(session, 'u__demo__ask_user', { message })
      await recordedInStore(store, [taskId], 'native')
      await session.waitFor(taskId, ['input_required'])
      const from = b.lines.length
      a.child.kill('SIGKILL')
      await a.exited
      await loggedLine(b, 'took over the tasks of a lost gateway process', { from })
      const viaB = session.on(b.url)
      const controller = new AbortController()
      const stream = await viaB.stream({ taskResult: taskId }, controller.signal)
      const question = await next(stream, (m) => m.method === 'elicitation/create')
      expect((question.params as Json).message).toBe(message)
      expect((await viaB.post({ jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { name: 'process B' } } })).status).toBe(202)
      const result = await next(stream, (m) => 'result' in m || 'error' in m)
      controller.abort()
      expect(result.result).toMatchObject({ content: [{ text: 'Hello, process B!' }] })
      expect(proxy.countWhere('tools/call demo__ask_user', (args) => args.message === message)).toBe(1)
    })

    it.sequential('a process shutting down hands its upstream tasks over at once, without cancelling them upstream', { timeout: 120_000 }, async () => {
      const config = { store: shared.config, server: { stateSecret: STATE_SECRET }, admin: { port: 0, tokenSha256: sha256Hex(ADMIN_TOKEN) }, tasks: { pollInterval: '50ms', ownerLease: '2s' }, upstreams: [{ name: 'u', transport: 'streamable-http', url: proxy.url, era: 'auto' }] }
      const [a, b] = await Promise.all([startGateway(config), startGateway(config)])
      try {
        const session = await RawSession.open(a.url)
        // Long enough to be running still when the process closes, however slowly a loaded machine gets there.
        const duration = 8000 + offset
        const taskIds = await Promise.all(Array.from({ length: 3 }, async (_, i) => await legacyTask(session, 'u__demo__slow', { duration, steps: 3 + i })))
        await recordedInStore(store, taskIds, 'native')
        const upstreamTasks = await upstreamTaskIds(store, taskIds)
        // What a restart costs, before one: any task's call the upstream runs as its own task is resumed.
        const survival = await a.gateway.admin!.inject({ method: 'GET', url: '/admin/survival', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
        expect(survival.json<Json>()).toMatchObject({
          upstreams: [{ upstream: 'u', resume: 'auto', others: 'resumed if the upstream runs the call as its own task (2026-07-28 tasks extension), else lost' }],
        })
        await a.close()
        expect(a.gateway.tasks.handedOver).toBe(3)
        await expectCompleted(session.on(b.url), taskIds, (i) => `slow finished: ${3 + i} steps in ${duration} ms`)
        expect(proxy.countWhere('tasks/cancel', (params) => upstreamTasks.includes(String(params.taskId)))).toBe(0)
      } finally {
        await Promise.all([a.close(), b.close()])
      }
    })

    it.sequential('a task whose upstream forgot its task fails, saying why', { timeout: 120_000 }, async ({ onTestFinished }) => {
      // An upstream of its own, behind a proxy of its own: the test replaces it.
      // The one that replaces it, on a new memory store, is started first: the task must still run when it takes over.
      const [own, forgetful] = await Promise.all([
        startGateway({ upstreams: [demoStdio()], tasks: { decide: 'always', pollInterval: '50ms' } }),
        startGateway({ upstreams: [demoStdio()], tasks: { decide: 'always' } }),
      ])
      const ownProxy = new CountingProxy(own.url)
      await ownProxy.listen()
      const gateways = [own, forgetful]
      onTestFinished(async () => {
        await stopAll(processes)
        await ownProxy.close()
        // Closing one waits for the calls it still runs.
        await Promise.all(gateways.map(async (gw) => await gw.close()))
      })
      const [a, b] = await startPair(writeConfig(`
store: ${shared.yaml}
server: { stateSecret: ${JSON.stringify(STATE_SECRET)} }
tasks: { pollInterval: 50ms, ownerLease: 2s }
${upstreamYaml(ownProxy.url)}`), processes)
      const session = await RawSession.open(a.url)
      const taskId = await legacyTask(session, 'u__demo__slow', { duration: 6000, steps: 6 })
      await recordedInStore(store, [taskId], 'native')
      // The upstream is replaced by the forgetful one (behind the same proxy) while the owner is dead: the task is
      // gone before the other process takes it over (its owner's lease lapses seconds after the kill).
      a.child.kill('SIGKILL')
      await a.exited
      ownProxy.retarget(forgetful.url)
      const task = await session.on(b.url).waitFor(taskId, ['completed', 'failed', 'cancelled'])
      expect(task.status).toBe('failed')
      expect(String(task.statusMessage)).toMatch(/^gateway process stopped during execution, and upstream task '[^']+' could not be reached again: /)
    })
  })

  it.concurrent('kill -9 and restart on SQLite: the new process follows the upstream tasks the old one started', { timeout: 120_000 }, async ({ onTestFinished }) => {
    const processes: GatewayProcess[] = []
    onTestFinished(async () => { await stopAll(processes) })
    const database = join(mkdtempSync(join(tmpdir(), 'gw-resume26-')), 'gateway.db')
    const sqlite = writeConfig(`
store: { kind: sqlite, path: ${JSON.stringify(database)} }
tasks: { pollInterval: 50ms }
${upstreamYaml()}`)
    const first = await startGatewayProcess(sqlite)
    processes.push(first)
    const session = await RawSession.open(first.url)
    // The stores' tasks run longer: these are told from theirs by the duration.
    const taskIds = await Promise.all(Array.from({ length: 3 }, async (_, i) => await legacyTask(session, 'u__demo__slow', { duration: 2000, steps: 2 + i })))
    await recordedInSqlite(database, taskIds, 'native')
    first.child.kill('SIGKILL')
    await first.exited
    const second = await startGatewayProcess(sqlite)
    processes.push(second)
    await expectCompleted(session.on(second.url), taskIds, (i) => `slow finished: ${2 + i} steps in 2000 ms`)
    expect(proxy.countWhere('tools/call demo__slow', (args) => args.duration === 2000)).toBe(3)
  })
})
