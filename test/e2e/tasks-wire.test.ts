import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { demoStdio, gatewayForSuite, type RunningGateway, startGateway } from '../helpers/gateway.ts'
import { legacyTask, next, RawSession } from '../helpers/raw-session.ts'

type Json = Record<string, unknown>
const RELATED = 'io.modelcontextprotocol/related-task'

const isElicitation = (m: Json): boolean => m.method === 'elicitation/create'

/** Wire-level behaviour of the 2025-11-25 task dialect: where input requests go, who may answer, redelivery. */
describe('task input requests on the wire', () => {
  const gw = gatewayForSuite()

  it('delivers the input on tasks/result and accepts the answer on a new connection', async () => {
    const session = await RawSession.open(gw.url)
    const taskId = await legacyTask(session, 'demo__ask_user', { message: 'Who?' })
    const controller = new AbortController()
    const stream = await session.stream({ taskResult: taskId }, controller.signal)
    const request = await next(stream, isElicitation)
    expect(((request.params as Json)._meta as Json)[RELATED]).toEqual({ taskId })
    expect((await session.waitFor(taskId, ['input_required'])).statusMessage).toContain('Who?')
    const answer = await session.post({ jsonrpc: '2.0', id: request.id, result: { action: 'accept', content: { name: 'Lin' } } }, { fresh: true })
    expect(answer.status).toBe(202)
    const final = await next(stream, (m) => 'result' in m || 'error' in m)
    expect(JSON.stringify(final.result)).toContain('Hello, Lin!')
    controller.abort()
  })

  it('offers the same request again after the client dropped its tasks/result stream', async () => {
    const session = await RawSession.open(gw.url)
    const taskId = await legacyTask(session, 'demo__ask_user')
    const first = new AbortController()
    const request = await next(await session.stream({ taskResult: taskId }, first.signal), isElicitation)
    first.abort()
    const second = new AbortController()
    const stream = await session.stream({ taskResult: taskId }, second.signal)
    const again = await next(stream, isElicitation)
    expect(again.id).toBe(request.id)
    await session.post({ jsonrpc: '2.0', id: again.id, result: { action: 'accept', content: { name: 'Ode' } } })
    expect(JSON.stringify((await next(stream, (m) => 'result' in m)).result)).toContain('Hello, Ode!')
    second.abort()
  })

  it('uses the GET stream for clients that never call tasks/result, with status notifications', async () => {
    const session = await RawSession.open(gw.url)
    const controller = new AbortController()
    const get = await session.stream('get', controller.signal)
    const taskId = await legacyTask(session, 'demo__ask_user')
    const status = await next(get, (m) => m.method === 'notifications/tasks/status' && (m.params as Json).status === 'input_required')
    expect((status.params as Json).taskId).toBe(taskId)
    const request = await next(get, isElicitation)
    await session.post({ jsonrpc: '2.0', id: request.id, result: { action: 'decline' } })
    await next(get, (m) => m.method === 'notifications/tasks/status' && (m.params as Json).status === 'completed')
    const result = await session.request('tasks/result', { taskId })
    expect(JSON.stringify(result.result)).toContain('declined')
    controller.abort()
  })

  it('expires an input the upstream stopped waiting for and says so', async () => {
    const session = await RawSession.open(gw.url)
    const controller = new AbortController()
    const get = await session.stream('get', controller.signal)
    const taskId = await legacyTask(session, 'demo__ask_user', { timeoutMs: 200 })
    const expired = await next(get, (m) => m.method === 'notifications/tasks/status' && String((m.params as Json).statusMessage).includes('stopped waiting'))
    expect((expired.params as Json).taskId).toBe(taskId)
    await session.waitFor(taskId, ['failed', 'completed'])
    controller.abort()
  })

  it('rejects an answer from another session without touching the task', async () => {
    const owner = await RawSession.open(gw.url)
    const other = await RawSession.open(gw.url)
    const taskId = await legacyTask(owner, 'demo__ask_user')
    const controller = new AbortController()
    const stream = await owner.stream({ taskResult: taskId }, controller.signal)
    const request = await next(stream, isElicitation)
    const foreign = await other.post({ jsonrpc: '2.0', id: request.id, result: { action: 'accept', content: { name: 'Mallory' } } })
    expect(foreign.status).toBe(400)
    expect((await owner.waitFor(taskId, ['input_required'])).status).toBe('input_required')
    await owner.post({ jsonrpc: '2.0', id: request.id, result: { action: 'accept', content: { name: 'Owner' } } })
    expect(JSON.stringify((await next(stream, (m) => 'result' in m)).result)).toContain('Hello, Owner!')
    controller.abort()
  })

  it('keeps each session\'s tasks to itself when auth is off', async () => {
    const one = await RawSession.open(gw.url)
    const two = await RawSession.open(gw.url)
    const taskId = await legacyTask(one, 'demo__slow', { duration: 10, steps: 1 })
    const foreign = await two.request('tasks/get', { taskId })
    const unknown = await two.request('tasks/get', { taskId: 'AAAAAAAAAAAAAAAAAAAAAA' })
    expect((foreign.error as Json).code).toBe(-32602)
    expect((foreign.error as Json).message).toBe(((unknown.error as Json).message as string).replace('AAAAAAAAAAAAAAAAAAAAAA', taskId))
    expect(((await two.request('tasks/list')).result as Json).tasks).toEqual([])
    expect(((await one.request('tasks/list')).result as { tasks: Json[] }).tasks.map((t) => t.taskId)).toEqual([taskId])
  })
})

describe('principals from bearer tokens', () => {
  let gw: RunningGateway
  const alice = 'alice-token-0123456789'
  const bob = 'bob-token-9876543210'

  beforeAll(async () => {
    gw = await startGateway({
      upstreams: [demoStdio()],
      auth: { tokens: [{ principal: 'alice', sha256: sha256Hex(alice) }, { principal: 'bob', sha256: sha256Hex(bob) }] },
      tasks: { maxActivePerPrincipal: 2 },
      server: { shutdownGrace: '100ms' },
    })
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('answers 401 with WWW-Authenticate without a valid token', async () => {
    const missing = await new RawSession(gw.url).post({ jsonrpc: '2.0', id: 1, method: 'ping' })
    expect(missing.status).toBe(401)
    expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="mcp-task-gateway"')
    const wrong = await new RawSession(gw.url, { authorization: 'Bearer nope' }).post({ jsonrpc: '2.0', id: 1, method: 'ping' })
    expect(wrong.status).toBe(401)
  })

  it('lets a principal see its tasks from any of its sessions and nobody else', async () => {
    const a1 = await RawSession.open(gw.url, {}, { authorization: `Bearer ${alice}` })
    const a2 = await RawSession.open(gw.url, {}, { authorization: `Bearer ${alice}` })
    const b = await RawSession.open(gw.url, {}, { authorization: `Bearer ${bob}` })
    const taskId = await legacyTask(a1, 'demo__slow', { duration: 10, steps: 1 })
    expect(((await a2.waitFor(taskId, ['completed'])).taskId)).toBe(taskId)
    for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
      expect(((await b.request(method, { taskId })).error as Json).code).toBe(-32602)
    }
    expect(((await b.request('tasks/list')).result as Json).tasks).toEqual([])
    const hijack = await new RawSession(gw.url, { authorization: `Bearer ${bob}` })
    hijack.sessionId = a1.sessionId
    expect((await hijack.post({ jsonrpc: '2.0', id: 1, method: 'ping' })).status).toBe(404)
  })

  it('limits the tasks one principal may run at once', async () => {
    const b = await RawSession.open(gw.url, {}, { authorization: `Bearer ${bob}` })
    await legacyTask(b, 'demo__slow', { duration: 5000, steps: 50 })
    await legacyTask(b, 'demo__slow', { duration: 5000, steps: 50 })
    const third = await b.request('tools/call', { name: 'demo__slow', arguments: {}, task: {} })
    expect(third.error).toMatchObject({ code: -32054, message: expect.stringContaining('maxActivePerPrincipal') })
  })
})

describe('the size of a stored task result', () => {
  const gw = gatewayForSuite({ upstreams: [demoStdio()], tasks: { maxResultBytes: '64kb' } })

  it('fails a task whose result is over tasks.maxResultBytes with an error naming the option; smaller results are kept', async () => {
    const session = await RawSession.open(gw.url)
    const large = await legacyTask(session, 'demo__echo', { text: 'x'.repeat(100 * 1024) })
    expect(await session.waitFor(large, ['completed', 'failed'])).toMatchObject({
      status: 'failed',
      statusMessage: expect.stringContaining('tasks.maxResultBytes'),
    })
    const error = (await session.request('tasks/result', { taskId: large })).error as Json
    expect(error).toMatchObject({ code: -32060, message: expect.stringMatching(/result of \d+ bytes is over the 65536 bytes .*\(tasks\.maxResultBytes\)/) })

    const small = await legacyTask(session, 'demo__echo', { text: 'y'.repeat(1024) })
    expect(await session.waitFor(small, ['completed', 'failed'])).toMatchObject({ status: 'completed' })
    expect(JSON.stringify((await session.request('tasks/result', { taskId: small })).result)).toContain('y'.repeat(1024))
  })
})
