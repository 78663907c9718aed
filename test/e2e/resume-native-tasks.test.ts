import { randomUUID } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { CountingProxy } from '../helpers/counting-proxy.ts'
import { loggedLine, startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { legacyTask, next, RawSession } from '../helpers/raw-session.ts'
import { purge, REDIS_URL } from '../helpers/redis.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const TOOL = 'ev__simulate-research-query'

/**
 * Two gateway processes on one Redis in front of @modelcontextprotocol/server-everything over Streamable HTTP,
 * whose `simulate-research-query` runs as the server's own task (four stages of a second). The process that
 * runs the tasks is killed with SIGKILL mid-task: the other adopts them, reaches the upstream tasks again on
 * the same upstream session, and the client sees them finish with the upstream's real report.
 */
describe('tasks of an upstream that runs them as its own survive the death of their gateway process', () => {
  const prefix = `mcpgw-resume:${randomUUID()}:`
  let everything: StartedUpstream
  let proxy: CountingProxy
  let redis: Redis
  let file: string
  const processes: GatewayProcess[] = []

  beforeAll(async () => {
    everything = await startUpstream('test/fixtures/everything-http.mjs', [], { readyTimeoutMs: 60_000 })
    proxy = new CountingProxy(everything.url)
    await proxy.listen()
    redis = new Redis(REDIS_URL)
    file = writeConfig(`
store: { kind: redis, url: ${JSON.stringify(REDIS_URL)}, prefix: ${JSON.stringify(prefix)} }
tasks: { pollInterval: 50ms, ownerLease: 2s }
upstreams:
  - name: ev
    transport: streamable-http
    url: ${JSON.stringify(proxy.url)}
    timeouts: { connect: 60s }
`)
  }, 90_000)

  // Each test starts its own processes on the store: those of an earlier test must not take its tasks over.
  afterEach(async () => { await stopAll(processes) })

  afterAll(async () => {
    for (const gateway of processes) if (gateway.child.exitCode === null && gateway.child.signalCode === null) gateway.child.kill('SIGTERM')
    await Promise.all(processes.map(async (p) => await p.exited))
    redis?.disconnect()
    await purge(prefix)
    await proxy?.close()
    await everything?.close()
  })

  async function gateway (): Promise<GatewayProcess> {
    const started = await startGatewayProcess(file)
    processes.push(started)
    return started
  }

  /** Waits until the store says where the upstream task of each task runs (what a new owner needs). */
  async function recorded (taskIds: string[]): Promise<void> {
    await until('every task recording its upstream task', async () => {
      const stored = await Promise.all(taskIds.map(async (id) => await redis.hget(`${prefix}task:${id}`, 'res')))
      return stored.every((res) => typeof res === 'string' && res !== '') ? true : undefined
    })
  }

  it('SIGKILL of the owner mid-task: every task completes with its real report, none run twice upstream', { timeout: 90_000 }, async () => {
    const [a, b] = await Promise.all([gateway(), gateway()])
    const session = await RawSession.open(a.url)
    const before = proxy.count('tools/call simulate-research-query')
    const taskIds = await Promise.all(Array.from({ length: 10 }, async (_, i) => await legacyTask(session, TOOL, { topic: `topic ${i}` })))
    await recorded(taskIds)
    a.child.kill('SIGKILL')
    await a.exited
    const viaB = session.on(b.url)
    for (const [i, taskId] of taskIds.entries()) {
      const task = await viaB.waitFor(taskId, ['completed', 'failed', 'cancelled'])
      expect(task.status, JSON.stringify(task)).toBe('completed')
      const result = await viaB.request('tasks/result', { taskId })
      expect(JSON.stringify(result.result)).toContain(`Research Report: topic ${i}`)
    }
    expect(proxy.count('tools/call simulate-research-query') - before).toBe(10)
  })

  it('a plain call whose stream the upstream replays (its own event store) completes after the kill, called once', { timeout: 90_000 }, async () => {
    const [a, b] = await Promise.all([gateway(), gateway()])
    const session = await RawSession.open(a.url)
    const taskId = await legacyTask(session, 'ev__trigger-long-running-operation', { duration: 3, steps: 3 })
    await until('the task recording its replayable stream', async () => {
      const res = await redis.hget(`${prefix}task:${taskId}`, 'res')
      return typeof res === 'string' && res.includes('"stream"') ? true : undefined
    })
    a.child.kill('SIGKILL')
    await a.exited
    const viaB = session.on(b.url)
    expect((await viaB.waitFor(taskId, ['completed', 'failed', 'cancelled'])).status).toBe('completed')
    expect(JSON.stringify((await viaB.request('tasks/result', { taskId })).result)).toContain('Long running operation completed. Duration: 3 seconds')
    expect(proxy.count('tools/call trigger-long-running-operation')).toBe(1)
  })

  it('an elicitation the upstream task asked before the kill is answered through the process that adopted it', { timeout: 90_000 }, async () => {
    const [a, b] = await Promise.all([gateway(), gateway()])
    const session = await RawSession.open(a.url, { elicitation: { form: {} } })
    const taskId = await legacyTask(session, TOOL, { topic: 'jaguar', ambiguous: true })
    await recorded([taskId])
    // The upstream's question is stored for the client (the task waits for input) before the kill.
    await session.waitFor(taskId, ['input_required'])
    a.child.kill('SIGKILL')
    await a.exited
    const viaB = session.on(b.url)
    const controller = new AbortController()
    const stream = await viaB.stream({ taskResult: taskId }, controller.signal)
    const question = await next(stream, (m) => m.method === 'elicitation/create')
    expect(String((question.params as Json).message)).toContain('jaguar')
    const answered = await viaB.post({ jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { interpretation: 'the gateway' } } })
    expect(answered.status).toBe(202)
    const result = await next(stream, (m) => 'result' in m || 'error' in m)
    controller.abort()
    expect(JSON.stringify(result)).toContain('jaguar (the gateway)')
    expect((await viaB.waitFor(taskId, ['completed', 'failed'])).status).toBe('completed')
  })

  it('an elicitation answered after another process adopted the task reaches the upstream task', { timeout: 90_000 }, async () => {
    const [a, b] = await Promise.all([gateway(), gateway()])
    const session = await RawSession.open(a.url, { elicitation: { form: {} } })
    const taskId = await legacyTask(session, TOOL, { topic: 'mercury', ambiguous: true })
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
    await viaB.post({ jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { interpretation: 'the planet' } } })
    const result = await next(stream, (m) => 'result' in m || 'error' in m)
    controller.abort()
    expect(JSON.stringify(result)).toContain('mercury (the planet)')
  })
})

/**
 * One gateway process on a SQLite file in front of the same server, killed with SIGKILL mid-task and started
 * again on the same file: the new process resumes the upstream tasks the old one left.
 */
describe('tasks of an upstream that runs them as its own survive a kill -9 and restart on SQLite', () => {
  let everything: StartedUpstream
  let proxy: CountingProxy
  const processes: GatewayProcess[] = []

  beforeAll(async () => {
    everything = await startUpstream('test/fixtures/everything-http.mjs', [], { readyTimeoutMs: 60_000 })
    proxy = new CountingProxy(everything.url)
    await proxy.listen()
  }, 90_000)

  afterAll(async () => {
    for (const gateway of processes) if (gateway.child.exitCode === null && gateway.child.signalCode === null) gateway.child.kill('SIGTERM')
    await Promise.all(processes.map(async (p) => await p.exited))
    await proxy?.close()
    await everything?.close()
  })

  it('the restarted process completes every task with its real report, none run twice upstream', { timeout: 90_000 }, async () => {
    const database = join(mkdtempSync(join(tmpdir(), 'gw-resume-')), 'gateway.db')
    const file = writeConfig(`
store: { kind: sqlite, path: ${JSON.stringify(database)} }
tasks: { pollInterval: 50ms }
upstreams:
  - name: ev
    transport: streamable-http
    url: ${JSON.stringify(proxy.url)}
    timeouts: { connect: 60s }
`)
    const first = await startGatewayProcess(file)
    processes.push(first)
    const session = await RawSession.open(first.url)
    const taskIds = await Promise.all(Array.from({ length: 5 }, async (_, i) => await legacyTask(session, TOOL, { topic: `restart ${i}` })))
    const reader = new Database(database, { readonly: true, fileMustExist: true })
    try {
      const resumeOf = reader.prepare<[string], { resume: string | null }>('SELECT resume FROM tasks WHERE id = ?')
      await until('every task recording its upstream task', async () => taskIds.every((id) => resumeOf.get(id)?.resume != null) ? true : undefined)
    } finally {
      reader.close()
    }
    first.child.kill('SIGKILL')
    await first.exited
    const second = await startGatewayProcess(file)
    processes.push(second)
    // The client's session is in the file too: it goes on with the new process.
    const after = session.on(second.url)
    for (const [i, taskId] of taskIds.entries()) {
      const task = await after.waitFor(taskId, ['completed', 'failed', 'cancelled'])
      expect(task.status, JSON.stringify(task)).toBe('completed')
      expect(JSON.stringify((await after.request('tasks/result', { taskId })).result)).toContain(`Research Report: restart ${i}`)
    }
    expect(proxy.count('tools/call simulate-research-query')).toBe(5)
    expect(second.lines.some((line) => line.includes('recovered tasks interrupted by a restart') && line.includes('"resumed":5'))).toBe(true)
  })
})
