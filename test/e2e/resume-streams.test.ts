import { randomUUID } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { CountingProxy } from '../helpers/counting-proxy.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { loggedLine, startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { legacyTask, next, RawSession } from '../helpers/raw-session.ts'
import { purge, REDIS_URL } from '../helpers/redis.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

/**
 * Plain calls (the upstream runs no task of its own) on an upstream that replays its SSE streams (event ids,
 * Last-Event-ID): a task's call outlives the gateway process that made it. The process taking the task over
 * reads the rest of the call's stream on the same upstream session, and the client sees the task finish.
 */
describe('tasks of plain calls whose streams the upstream replays survive their gateway process', () => {
  const prefix = `mcpgw-streams:${randomUUID()}:`
  let upstream: StartedUpstream
  let proxy: CountingProxy
  let redis: Redis
  let file: string
  const processes: GatewayProcess[] = []
  const inProcess: RunningGateway[] = []

  beforeAll(async () => {
    upstream = await startUpstream('test/fixtures/replayable-upstream.ts', ['--port', '0'])
    proxy = new CountingProxy(upstream.url)
    await proxy.listen()
    redis = new Redis(REDIS_URL)
    file = writeConfig(`
store: { kind: redis, url: ${JSON.stringify(REDIS_URL)}, prefix: ${JSON.stringify(prefix)} }
tasks: { pollInterval: 50ms, ownerLease: 2s }
upstreams:
  - name: rp
    transport: streamable-http
    url: ${JSON.stringify(proxy.url)}
`)
  })

  // Each test starts its own processes on the store: those of an earlier test must not take its tasks over.
  afterEach(async () => { await stopAll(processes) })

  afterAll(async () => {
    for (const gateway of processes) if (gateway.child.exitCode === null && gateway.child.signalCode === null) gateway.child.kill('SIGTERM')
    await Promise.all(processes.map(async (p) => await p.exited))
    await Promise.all(inProcess.map(async (gw) => await gw.close()))
    redis?.disconnect()
    await purge(prefix)
    await proxy?.close()
    await upstream?.close()
  })

  async function pair (): Promise<[GatewayProcess, GatewayProcess]> {
    const started = await Promise.all([startGatewayProcess(file), startGatewayProcess(file)])
    processes.push(...started)
    return started
  }

  /** Waits until the store says where each task's call stream can be replayed from. */
  async function recorded (taskIds: string[]): Promise<void> {
    await until('every task recording its replayable stream', async () => {
      const stored = await Promise.all(taskIds.map(async (id) => await redis.hget(`${prefix}task:${id}`, 'res')))
      return stored.every((res) => typeof res === 'string' && res.includes('"stream"')) ? true : undefined
    })
  }

  it('SIGKILL of the owner mid-call: every task completes with the call\'s real result, none called twice', { timeout: 60_000 }, async () => {
    const [a, b] = await pair()
    const session = await RawSession.open(a.url)
    const before = proxy.count('tools/call slow_report')
    const taskIds = await Promise.all(Array.from({ length: 5 }, async (_, i) => await legacyTask(session, 'rp__slow_report', { topic: `stream ${i}`, ms: 3000 })))
    await recorded(taskIds)
    a.child.kill('SIGKILL')
    await a.exited
    const viaB = session.on(b.url)
    for (const [i, taskId] of taskIds.entries()) {
      const task = await viaB.waitFor(taskId, ['completed', 'failed', 'cancelled'])
      expect(task.status, JSON.stringify(task)).toBe('completed')
      expect(JSON.stringify((await viaB.request('tasks/result', { taskId })).result)).toContain(`report on stream ${i} after 3 steps`)
    }
    expect(proxy.count('tools/call slow_report') - before).toBe(5)
    expect(proxy.count('notifications/cancelled')).toBe(0)
  })

  it('a question the call asked before the kill is answered through the process that adopted it', { timeout: 60_000 }, async () => {
    const [a, b] = await pair()
    const session = await RawSession.open(a.url, { elicitation: { form: {} } })
    const taskId = await legacyTask(session, 'rp__ask_then_report', { topic: 'tides' })
    await recorded([taskId])
    await session.waitFor(taskId, ['input_required'])
    const from = b.lines.length
    a.child.kill('SIGKILL')
    await a.exited
    await loggedLine(b, 'took over the tasks of a lost gateway process', { from })
    const viaB = session.on(b.url)
    const controller = new AbortController()
    const stream = await viaB.stream({ taskResult: taskId }, controller.signal)
    const question = await next(stream, (m) => m.method === 'elicitation/create')
    expect(String((question.params as Json).message)).toContain('tides')
    await viaB.post({ jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { answer: 'high at noon' } } })
    const result = await next(stream, (m) => 'result' in m || 'error' in m)
    controller.abort()
    expect(JSON.stringify(result)).toContain('report on tides: high at noon')
  })

  it('a task whose upstream forgot the call\'s session fails, saying why', { timeout: 60_000 }, async () => {
    const [a, b] = await pair()
    const session = await RawSession.open(a.url)
    const taskId = await legacyTask(session, 'rp__slow_report', { topic: 'forgotten', ms: 20_000, steps: 20 })
    await recorded([taskId])
    a.child.kill('SIGKILL')
    await a.exited
    // The upstream restarts (on another port, behind the same proxy): its sessions and their streams are gone.
    await upstream.close()
    upstream = await startUpstream('test/fixtures/replayable-upstream.ts', ['--port', '0'])
    proxy.retarget(upstream.url)
    const task = await session.on(b.url).waitFor(taskId, ['completed', 'failed', 'cancelled'])
    expect(task.status).toBe('failed')
    expect(String(task.statusMessage)).toMatch(/^gateway process stopped during execution, and the stream of its upstream call could not be reached again: /)
    const result = await session.on(b.url).request('tasks/result', { taskId })
    expect(result.error).toMatchObject({ code: -32603 })
  })

  it('a process shutting down hands the calls over without cancelling them upstream', { timeout: 60_000 }, async () => {
    const store = { kind: 'redis', url: REDIS_URL, prefix }
    const config = { store, tasks: { pollInterval: '50ms', ownerLease: '2s' }, upstreams: [{ name: 'rp', transport: 'streamable-http', url: proxy.url }] }
    const [a, b] = await Promise.all([startGateway(config), startGateway(config)])
    inProcess.push(a, b)
    const session = await RawSession.open(a.url)
    const before = proxy.count('tools/call slow_report')
    const taskIds = await Promise.all(Array.from({ length: 3 }, async (_, i) => await legacyTask(session, 'rp__slow_report', { topic: `handover ${i}`, ms: 2000 })))
    await recorded(taskIds)
    await a.close()
    expect(a.gateway.tasks.handedOver).toBe(3)
    const viaB = session.on(b.url)
    for (const [i, taskId] of taskIds.entries()) {
      expect((await viaB.waitFor(taskId, ['completed', 'failed'])).status).toBe('completed')
      expect(JSON.stringify((await viaB.request('tasks/result', { taskId })).result)).toContain(`report on handover ${i} after 3 steps`)
    }
    expect(proxy.count('tools/call slow_report') - before).toBe(3)
    expect(proxy.count('notifications/cancelled')).toBe(0)
  })
})

/** One process on a SQLite file, killed with SIGKILL mid-call and started again: the new one replays the calls' streams. */
describe('tasks of plain calls whose streams the upstream replays survive a kill -9 and restart on SQLite', () => {
  let upstream: StartedUpstream
  let proxy: CountingProxy
  const processes: GatewayProcess[] = []

  beforeAll(async () => {
    upstream = await startUpstream('test/fixtures/replayable-upstream.ts', ['--port', '0'])
    proxy = new CountingProxy(upstream.url)
    await proxy.listen()
  })

  afterAll(async () => {
    await stopAll(processes)
    await proxy?.close()
    await upstream?.close()
  })

  it('the restarted process completes every task with the call\'s real result, none called twice', { timeout: 60_000 }, async () => {
    const database = join(mkdtempSync(join(tmpdir(), 'gw-streams-')), 'gateway.db')
    const file = writeConfig(`
store: { kind: sqlite, path: ${JSON.stringify(database)} }
tasks: { pollInterval: 50ms }
upstreams:
  - name: rp
    transport: streamable-http
    url: ${JSON.stringify(proxy.url)}
`)
    const first = await startGatewayProcess(file)
    processes.push(first)
    const session = await RawSession.open(first.url)
    const taskIds = await Promise.all(Array.from({ length: 3 }, async (_, i) => await legacyTask(session, 'rp__slow_report', { topic: `restart ${i}`, ms: 3000 })))
    const reader = new Database(database, { readonly: true, fileMustExist: true })
    try {
      const resumeOf = reader.prepare<[string], { resume: string | null }>('SELECT resume FROM tasks WHERE id = ?')
      await until('every task recording its replayable stream', async () => taskIds.every((id) => resumeOf.get(id)?.resume?.includes('"stream"') === true) ? true : undefined)
    } finally {
      reader.close()
    }
    first.child.kill('SIGKILL')
    await first.exited
    const second = await startGatewayProcess(file)
    processes.push(second)
    const after = session.on(second.url)
    for (const [i, taskId] of taskIds.entries()) {
      expect((await after.waitFor(taskId, ['completed', 'failed', 'cancelled'])).status).toBe('completed')
      expect(JSON.stringify((await after.request('tasks/result', { taskId })).result)).toContain(`report on restart ${i} after 3 steps`)
    }
    expect(proxy.count('tools/call slow_report')).toBe(3)
  })
})
