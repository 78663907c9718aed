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
 */
describe('tasks of a 2026-07-28 upstream survive the death of their gateway process', () => {
  let upstream: RunningGateway
  let proxy: CountingProxy
  const processes: GatewayProcess[] = []
  /** Upstreams a test replaced, closed at the end (closing one waits for the calls it still runs). */
  const retired: RunningGateway[] = []

  const upstreamYaml = (): string => `
upstreams:
  - { name: u, transport: streamable-http, url: ${JSON.stringify(proxy.url)}, era: auto }
`

  beforeAll(async () => {
    upstream = await startGateway({ upstreams: [demoStdio()], tasks: { decide: 'always', pollInterval: '50ms' } })
    proxy = new CountingProxy(upstream.url)
    await proxy.listen()
  })

  afterEach(async () => { await stopAll(processes) })

  afterAll(async () => {
    await stopAll(processes)
    await proxy?.close()
    await Promise.all([upstream, ...retired].map(async (gw) => await gw?.close()))
  })

  describe.each(SHARED_KINDS)('on %s', (kind) => {
    const shared = sharedStore(kind, 'mcpgw-resume26')
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

    afterAll(async () => {
      await stopAll(processes)
      await store?.close()
      await shared.drop()
    })

    it('SIGKILL of the owner mid-task: every task completes with its real result, none run twice upstream', { timeout: 60_000 }, async () => {
      const [a, b] = await startPair(file, processes)
      const session = await RawSession.open(a.url)
      const before = proxy.count('tools/call demo__slow')
      const taskIds = await Promise.all(Array.from({ length: 6 }, async (_, i) => await legacyTask(session, 'u__demo__slow', { duration: 4000 + i * 100, steps: 4 })))
      await recordedInStore(store, taskIds, 'native')
      a.child.kill('SIGKILL')
      await a.exited
      await expectCompleted(session.on(b.url), taskIds, (i) => `slow finished: 4 steps in ${4000 + i * 100} ms`)
      expect(proxy.count('tools/call demo__slow') - before).toBe(6)
      expect(b.lines.some((line) => line.includes('resuming the upstream work of a task another gateway process ran'))).toBe(true)
    })

    it('a question the upstream task asked before the kill is answered through the process that adopted it', { timeout: 60_000 }, async () => {
      const [a, b] = await startPair(file, processes)
      const session = await RawSession.open(a.url, { elicitation: { form: {} } })
      const before = proxy.count('tools/call demo__ask_user')
      const taskId = await legacyTask(session, 'u__demo__ask_user', { message: 'Who adopts me?' })
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
      expect((question.params as Json).message).toBe('Who adopts me?')
      expect((await viaB.post({ jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { name: 'process B' } } })).status).toBe(202)
      const result = await next(stream, (m) => 'result' in m || 'error' in m)
      controller.abort()
      expect(result.result).toMatchObject({ content: [{ text: 'Hello, process B!' }] })
      expect(proxy.count('tools/call demo__ask_user') - before).toBe(1)
    })

    it('a process shutting down hands its upstream tasks over at once, without cancelling them upstream', { timeout: 60_000 }, async () => {
      const config = { store: shared.config, server: { stateSecret: STATE_SECRET }, admin: { port: 0, tokenSha256: sha256Hex(ADMIN_TOKEN) }, tasks: { pollInterval: '50ms', ownerLease: '2s' }, upstreams: [{ name: 'u', transport: 'streamable-http', url: proxy.url, era: 'auto' }] }
      const [a, b] = await Promise.all([startGateway(config), startGateway(config)])
      try {
        const session = await RawSession.open(a.url)
        const cancels = proxy.count('tasks/cancel')
        // Long enough to be running still when the process closes, however slowly a loaded machine gets there.
        const taskIds = await Promise.all(Array.from({ length: 3 }, async (_, i) => await legacyTask(session, 'u__demo__slow', { duration: 8000, steps: 3 + i })))
        await recordedInStore(store, taskIds, 'native')
        // What a restart costs, before one: any task's call the upstream runs as its own task is resumed.
        const survival = await a.gateway.admin!.inject({ method: 'GET', url: '/admin/survival', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
        expect(survival.json<Json>()).toMatchObject({
          upstreams: [{ upstream: 'u', resume: 'auto', others: 'resumed if the upstream runs the call as its own task (2026-07-28 tasks extension), else lost' }],
        })
        await a.close()
        expect(a.gateway.tasks.handedOver).toBe(3)
        await expectCompleted(session.on(b.url), taskIds, (i) => `slow finished: ${3 + i} steps in 8000 ms`)
        expect(proxy.count('tasks/cancel')).toBe(cancels)
      } finally {
        await Promise.all([a.close(), b.close()])
      }
    })

    it('a task whose upstream forgot its task fails, saying why', { timeout: 60_000 }, async () => {
      const [a, b] = await startPair(file, processes)
      const session = await RawSession.open(a.url)
      const taskId = await legacyTask(session, 'u__demo__slow', { duration: 6000, steps: 6 })
      await recordedInStore(store, [taskId], 'native')
      // The upstream is replaced by one on a new memory store (behind the same proxy) while the owner is dead: the
      // task is gone before the other process takes it over (its owner's lease lapses seconds after the kill).
      const forgetful = await startGateway({ upstreams: [demoStdio()], tasks: { decide: 'always' } })
      a.child.kill('SIGKILL')
      await a.exited
      retired.push(upstream)
      proxy.retarget(forgetful.url)
      upstream = forgetful
      const task = await session.on(b.url).waitFor(taskId, ['completed', 'failed', 'cancelled'])
      expect(task.status).toBe('failed')
      expect(String(task.statusMessage)).toMatch(/^gateway process stopped during execution, and upstream task '[^']+' could not be reached again: /)
    })
  })

  it('kill -9 and restart on SQLite: the new process follows the upstream tasks the old one started', { timeout: 60_000 }, async () => {
    const database = join(mkdtempSync(join(tmpdir(), 'gw-resume26-')), 'gateway.db')
    const sqlite = writeConfig(`
store: { kind: sqlite, path: ${JSON.stringify(database)} }
tasks: { pollInterval: 50ms }
${upstreamYaml()}`)
    const first = await startGatewayProcess(sqlite)
    processes.push(first)
    const session = await RawSession.open(first.url)
    const before = proxy.count('tools/call demo__slow')
    const taskIds = await Promise.all(Array.from({ length: 3 }, async (_, i) => await legacyTask(session, 'u__demo__slow', { duration: 2000, steps: 2 + i })))
    await recordedInSqlite(database, taskIds, 'native')
    first.child.kill('SIGKILL')
    await first.exited
    const second = await startGatewayProcess(sqlite)
    processes.push(second)
    await expectCompleted(session.on(second.url), taskIds, (i) => `slow finished: ${2 + i} steps in 2000 ms`)
    expect(proxy.count('tools/call demo__slow') - before).toBe(3)
  })
})
