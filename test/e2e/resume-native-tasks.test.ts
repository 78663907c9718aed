import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { CountingProxy } from '../helpers/counting-proxy.ts'
import { loggedLine, startGatewayProcess, writeConfig, type GatewayProcess } from '../helpers/process.ts'
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
