import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { demoStdioYaml, loggedLine, startGatewayProcess, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { next, RawSession } from '../helpers/raw-session.ts'
import { purge, REDIS_URL, STATE_SECRET } from '../helpers/redis.ts'

type Json = Record<string, unknown>

/** Two real gateway processes on one Redis: any process serves any request of a session or a task. */
describe('gateway processes sharing one Redis', () => {
  const prefix = `mcpgw-mp:${randomUUID()}:`
  let a: GatewayProcess
  let b: GatewayProcess

  beforeAll(async () => {
    const file = writeConfig(`
store: { kind: redis, url: ${JSON.stringify(REDIS_URL)}, prefix: ${JSON.stringify(prefix)} }
server: { stateSecret: ${JSON.stringify(STATE_SECRET)} }
logging: { level: info }
tasks: { pollInterval: 50ms }
upstreams:
${demoStdioYaml()}
`)
    ;[a, b] = await Promise.all([startGatewayProcess(file), startGatewayProcess(file)])
  })

  afterAll(async () => {
    for (const gateway of [a, b]) gateway?.child.kill('SIGTERM')
    await Promise.all([a?.exited, b?.exited])
    await purge(prefix)
  })

  it('serves a session initialized on one process from the other', async () => {
    const session = await RawSession.open(a.url)
    const tools = await session.on(b.url).request('tools/list')
    expect(((tools.result as Json).tools as Json[]).map((t) => t.name)).toContain('demo__ask_user')
  })

  it('runs a task on one process while its input, answer and result travel through the other', async () => {
    const session = await RawSession.open(a.url, { elicitation: { form: {} } })
    const viaB = session.on(b.url)
    const controller = new AbortController()
    const get = await viaB.stream('get', controller.signal)
    const created = await session.request('tools/call', { name: 'demo__ask_user', arguments: { message: 'Across?' }, task: {} })
    const taskId = ((created.result as Json).task as Json).taskId as string
    const request = await next(get, (m) => m.method === 'elicitation/create')
    expect((request.params as Json).message).toBe('Across?')
    const waiting = new AbortController()
    const result = await viaB.stream({ taskResult: taskId }, waiting.signal)
    const answer = await viaB.post({ jsonrpc: '2.0', id: request.id, result: { action: 'accept', content: { name: 'Bea' } } })
    expect(answer.status).toBe(202)
    expect(JSON.stringify((await next(result, (m) => 'result' in m)).result)).toContain('Hello, Bea!')
    controller.abort()
    waiting.abort()
  })

  it('cancels on one process the upstream call another process runs', async () => {
    const session = await RawSession.open(a.url)
    const controller = new AbortController()
    const get = await session.on(b.url).stream('get', controller.signal)
    const created = await session.request('tools/call', { name: 'demo__slow', arguments: { duration: 30_000, steps: 300 }, task: {}, _meta: { progressToken: 'running' } })
    const taskId = ((created.result as Json).task as Json).taskId as string
    // Its first progress says the call runs upstream (the client's upstream session is open).
    await next(get, (m) => m.method === 'notifications/progress')
    controller.abort()
    const cancelled = await session.on(b.url).request('tasks/cancel', { taskId })
    expect((cancelled.result as Json).status).toBe('cancelled')
    expect((await session.waitFor(taskId, ['cancelled'])).status).toBe('cancelled')
    // The demo upstream runs under process A and says on stderr (logged by A) that its call was cancelled.
    await loggedLine(a, 'slow: cancelled')
  })
})
