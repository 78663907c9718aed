import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { startCluster, type Cluster } from '../helpers/cluster.ts'
import { SHARED_KINDS } from '../helpers/shared-store.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { demoStdioYaml, type GatewayProcess } from '../helpers/process.ts'
import { next, RawSession } from '../helpers/raw-session.ts'
import { readSse } from '../helpers/sse.ts'
import { runTask } from '../helpers/tasks.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>
type Messages = AsyncGenerator<Json>

const isElicitation = (m: Json): boolean => m.method === 'elicitation/create'
const isFinal = (m: Json): boolean => 'result' in m || 'error' in m

/** The JSON-RPC messages of an SSE response, one at a time. */
async function * messagesOf (res: Awaited<ReturnType<RawSession['post']>>): Messages {
  expect(res.headers.get('content-type')).toContain('text/event-stream')
  for await (const event of readSse(res.body as ReadableStream<Uint8Array>)) {
    if (event.data !== '') yield JSON.parse(event.data) as Json
  }
}

/** Every message left on a stream, once it has ended. */
async function rest (stream: Messages): Promise<Json[]> {
  const seen: Json[] = []
  for await (const message of stream) seen.push(message)
  return seen
}

const upstreamCancelled = (line: string): boolean => line.includes('slow: cancelled')

/** How many log lines of these gateway processes say that the demo upstream saw a call cancelled. */
function cancellations (gateways: GatewayProcess[]): number {
  return gateways.reduce((sum, g) => sum + g.lines.filter(upstreamCancelled).length, 0)
}

/** Waits (bounded) until the gateway processes have logged more cancellations than `before`; returns how many. */
async function moreCancellations (gateways: GatewayProcess[], before: number): Promise<number> {
  return await until('the demo upstream to log a cancellation', () => cancellations(gateways) > before ? cancellations(gateways) : undefined, { everyMs: 20 })
}

async function createTask (session: RawSession, name: string, args: Json, meta: Json = {}): Promise<string> {
  const response = await session.request('tools/call', { name, arguments: args, task: { ttl: 60_000 }, _meta: meta })
  const taskId = ((response.result as Json | undefined)?.task as Json | undefined)?.taskId
  if (typeof taskId !== 'string') throw new Error(`no task created: ${JSON.stringify(response)}`)
  return taskId
}

/**
 * Three gateway processes on one shared store (Redis, then PostgreSQL) behind a round-robin balancer with no affinity, serving
 * 2025-11-25 (initialize) sessions: whatever process a request lands on, relayed requests get their
 * answers, cancellations reach the running call, and a task's messages reach the client's streams.
 */
describe.each(SHARED_KINDS)('2025-era sessions across three gateway processes on %s behind a round-robin balancer', (kind) => {
  let cluster: Cluster
  let p: [string, string, string]
  let client: Client
  const names: string[] = []
  /** Answers by question, for a task's input, which a client may be offered more than once (see task delivery). */
  const answers = new Map<string, string>()

  beforeAll(async () => {
    cluster = await startCluster(`
logging: { level: info }
tasks: { pollInterval: 50ms }
upstreams:
${demoStdioYaml()}
${demoStdioYaml('single')}
    maxConcurrentCalls: 1
    tools: { allow: [slow, ask_user] }
    resources: { deny: ['*'] }
`, { store: kind })
    p = cluster.processes.map((g) => g.url) as [string, string, string]
    client = await connectV1(cluster.url, {
      onElicit: (params) => ({ action: 'accept', content: { name: answers.get(String(params.message)) ?? names.shift() ?? `unnamed (asked: ${String(params.message)})` } }),
    })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.close()
  })

  it('serves an SDK client whose requests are spread over every process', async () => {
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['demo__ask_user', 'demo__slow', 'single__ask_user']))
    for (const text of ['one', 'two', 'three']) expect(textOf(await client.callTool({ name: 'demo__echo', arguments: { text } }))).toBe(text)
    expect([...cluster.balancer.served.keys()].sort()).toEqual(p.map((url) => new URL(url).origin).sort())
  })

  it('relays an elicitation during an SDK client\'s synchronous call and returns its answer upstream', async () => {
    for (const name of ['Ada', 'Bo', 'Cy']) {
      names.push(name)
      expect(textOf(await client.callTool({ name: 'demo__ask_user', arguments: { message: 'Name?' } }))).toBe(`Hello, ${name}!`)
    }
  })

  it('routes the answer to a relayed elicitation to the process running the call, and only for its session', async () => {
    const session = await RawSession.open(p[0])
    const stranger = await RawSession.open(p[2])
    const call = messagesOf(await session.post({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'demo__ask_user', arguments: { message: 'Who?' } } }))
    const request = await next(call, isElicitation)
    expect((request.params as Json).message).toBe('Who?')
    const answer = { jsonrpc: '2.0', id: request.id, result: { action: 'accept', content: { name: 'Lin' } } }

    const foreign = await stranger.post(answer)
    expect(foreign.status).toBe(400)
    expect(await foreign.json()).toMatchObject({ error: { code: -32600, message: `Invalid Request: no request with id ${JSON.stringify(request.id)} is waiting for an answer in this session` } })

    const accepted = await session.on(p[1]).post(answer)
    expect(accepted.status).toBe(202)
    expect(await next(call, isFinal)).toMatchObject({ id: 7, result: { content: [{ type: 'text', text: 'Hello, Lin!' }] } })
    expect((await session.on(p[2]).post(answer)).status).toBe(400)
  })

  it('cancels an SDK client\'s synchronous call on whichever process runs it', async () => {
    const before = cancellations(cluster.processes)
    const controller = new AbortController()
    const call = client.callTool({ name: 'demo__slow', arguments: { duration: 30_000, steps: 300 } }, undefined, {
      signal: controller.signal,
      onprogress: () => controller.abort(new Error('enough')),
    })
    await expect(call).rejects.toThrow('enough')
    expect(await moreCancellations(cluster.processes, before)).toBe(before + 1)
  })

  it('stops the upstream call when notifications/cancelled lands on another process than the call', async () => {
    const session = await RawSession.open(p[0])
    const before = cancellations([cluster.processes[0]!])
    const call = messagesOf(await session.post({ jsonrpc: '2.0', id: 'slow-1', method: 'tools/call', params: { name: 'demo__slow', arguments: { duration: 30_000, steps: 300 }, _meta: { progressToken: 'p' } } }))
    await next(call, (m) => m.method === 'notifications/progress')
    const cancel = await session.on(p[1]).post({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'slow-1', reason: 'changed my mind' } })
    expect(cancel.status).toBe(202)
    // The call's stream ends with no response (none is expected after a cancel), and the upstream stopped.
    expect((await rest(call)).filter(isFinal)).toEqual([])
    expect(await moreCancellations([cluster.processes[0]!], before)).toBe(before + 1)
  })

  it('runs an SDK client\'s task whose elicitation, answer and result travel through different processes', async () => {
    answers.set('Task name?', 'Dee')
    const outcome = await runTask(client, 'demo__ask_user', { message: 'Task name?' })
    expect(outcome.error).toBeUndefined()
    expect(textOf(outcome.result)).toBe('Hello, Dee!')
    const progress: number[] = []
    const slow = await runTask(client, 'demo__slow', { duration: 300, steps: 6 }, { onprogress: (p) => progress.push(p.progress) })
    expect(textOf(slow.result)).toContain('6 steps')
    expect(progress.length).toBeGreaterThan(0)
  })

  it('delivers an elicitation asked after tasks/result opened on another process on that stream, and takes the answer on a third', async () => {
    const session = await RawSession.open(p[0])
    // The upstream `single` takes one call at a time: the blocker holds it, so the next task waits in a queue.
    const blocker = await createTask(session, 'single__slow', { duration: 30_000, steps: 300 })
    const taskId = await createTask(session, 'single__ask_user', { message: 'Queued?' })
    // The task says it is queued once its run has asked for the call slot (a store write after the task's creation).
    const queued = await until('the task to be queued', async () => {
      const got = (await session.request('tasks/get', { taskId })).result as { statusMessage?: string }
      return got.statusMessage?.includes('queued') === true ? got : undefined
    })
    expect(queued).toMatchObject({ status: 'working', statusMessage: expect.stringContaining('queued') })

    const streamDone = new AbortController()
    const stream = await session.on(p[1]).stream({ taskResult: taskId }, streamDone.signal)
    expect((await session.on(p[2]).request('tasks/cancel', { taskId: blocker })).result).toMatchObject({ status: 'cancelled' })
    const request = await next(stream, isElicitation)
    expect(request.params).toMatchObject({ message: 'Queued?', _meta: { 'io.modelcontextprotocol/related-task': { taskId } } })
    expect((await session.on(p[2]).post({ jsonrpc: '2.0', id: request.id, result: { action: 'accept', content: { name: 'Q' } } })).status).toBe(202)
    expect(await next(stream, isFinal)).toMatchObject({ result: { content: [{ type: 'text', text: 'Hello, Q!' }] } })
    streamDone.abort()
  })

  it('streams the progress of a task running on one process to tasks/result on another, then wakes it with the result', async () => {
    const session = await RawSession.open(p[0])
    const taskId = await createTask(session, 'demo__slow', { duration: 1500, steps: 15 }, { progressToken: 'tp' })
    const streamDone = new AbortController()
    const stream = await session.on(p[1]).stream({ taskResult: taskId }, streamDone.signal)
    const progress = await next(stream, (m) => m.method === 'notifications/progress')
    expect(progress.params).toMatchObject({ progressToken: 'tp', _meta: { 'io.modelcontextprotocol/related-task': { taskId } } })
    expect(await next(stream, isFinal)).toMatchObject({ result: { content: [{ type: 'text', text: 'slow finished: 15 steps in 1500 ms' }] } })
    streamDone.abort()
  })

  it('wakes a tasks/result waiting on one process when the task completes on another', async () => {
    const session = await RawSession.open(p[2])
    const taskId = await createTask(session, 'demo__slow', { duration: 400, steps: 2 })
    const result = await session.on(p[0]).request('tasks/result', { taskId })
    expect(result.result).toMatchObject({ content: [{ type: 'text', text: 'slow finished: 2 steps in 400 ms' }] })
    expect((await session.on(p[1]).request('tasks/get', { taskId })).result).toMatchObject({ status: 'completed' })
  })

  it('cancels a task from another process, stopping its upstream call and telling the GET stream', async () => {
    const session = await RawSession.open(p[0])
    const getDone = new AbortController()
    const get = await session.on(p[2]).stream('get', getDone.signal)
    const before = cancellations([cluster.processes[0]!])
    const taskId = await createTask(session, 'demo__slow', { duration: 30_000, steps: 300 }, { progressToken: 'running' })
    // Its first progress says the call runs upstream (the client's upstream session is open).
    await next(get, (m) => m.method === 'notifications/progress' && (m.params as Json).progressToken === 'running')
    expect((await session.on(p[1]).request('tasks/cancel', { taskId })).result).toMatchObject({ taskId, status: 'cancelled' })
    const status = await next(get, (m) => m.method === 'notifications/tasks/status' && (m.params as Json).status === 'cancelled')
    expect(status.params).toMatchObject({ taskId, statusMessage: 'cancelled by the client' })
    expect(await moreCancellations([cluster.processes[0]!], before)).toBe(before + 1)
    expect((await session.on(p[2]).request('tasks/cancel', { taskId })).error).toMatchObject({ code: -32602 })
    getDone.abort()
  })

  it('sends notifications/tasks/status of a task running on one process to the GET stream held by another', async () => {
    const session = await RawSession.open(p[1])
    const getDone = new AbortController()
    const get = await session.on(p[0]).stream('get', getDone.signal)
    const taskId = await createTask(session, 'demo__ask_user', { message: 'Status?' })
    const waiting = await next(get, (m) => m.method === 'notifications/tasks/status' && (m.params as Json).status === 'input_required')
    expect(waiting.params).toMatchObject({ taskId, statusMessage: expect.stringContaining('Status?') })
    // No tasks/result stream is open, so the input request itself comes on the GET stream too.
    const request = await next(get, isElicitation)
    expect((await session.on(p[2]).post({ jsonrpc: '2.0', id: request.id, result: { action: 'decline' } })).status).toBe(202)
    await next(get, (m) => m.method === 'notifications/tasks/status' && (m.params as Json).status === 'completed')
    expect(JSON.stringify((await session.on(p[2]).request('tasks/result', { taskId })).result)).toContain('declined')
    getDone.abort()
  })

  it('offers an unanswered input again when a GET stream opens on a process other than the one running the task', async () => {
    const session = await RawSession.open(p[0])
    const taskId = await createTask(session, 'demo__ask_user', { message: 'Still there?' })
    await session.waitFor(taskId, ['input_required'])
    const getDone = new AbortController()
    const get = await session.on(p[1]).stream('get', getDone.signal)
    const request = await next(get, isElicitation)
    expect(request.params).toMatchObject({ message: 'Still there?', _meta: { 'io.modelcontextprotocol/related-task': { taskId } } })
    expect((await session.on(p[2]).post({ jsonrpc: '2.0', id: request.id, result: { action: 'accept', content: { name: 'Al' } } })).status).toBe(202)
    expect((await session.on(p[1]).request('tasks/result', { taskId })).result).toMatchObject({ content: [{ type: 'text', text: 'Hello, Al!' }] })
    getDone.abort()
  })

  it('offers an input once across processes: not again on tasks/result on another process while a GET stream carries it', async () => {
    const session = await RawSession.open(p[0])
    const getDone = new AbortController()
    const resultDone = new AbortController()
    const get = await session.on(p[1]).stream('get', getDone.signal)
    const taskId = await createTask(session, 'demo__ask_user', { message: 'Once?' })
    const request = await next(get, isElicitation)
    await session.waitFor(taskId, ['input_required'])
    const result = await session.on(p[2]).stream({ taskResult: taskId }, resultDone.signal)
    // Round trips to the process holding tasks/result (each one store read, as its attaching takes two) before the
    // person answers: the stream has been offered what it would be offered by then.
    for (let i = 0; i < 3; i++) await session.on(p[2]).request('tasks/get', { taskId })
    expect((await session.on(p[0]).post({ jsonrpc: '2.0', id: request.id, result: { action: 'accept', content: { name: 'Una' } } })).status).toBe(202)
    // The first thing on tasks/result is the task's result, not the request again.
    expect(await next(result, () => true)).toMatchObject({ result: { content: [{ type: 'text', text: 'Hello, Una!' }] } })
    getDone.abort()
    resultDone.abort()
  })

  it('offers an input again, with the same id, on tasks/result on another process once the GET stream that carried it is gone', async () => {
    const session = await RawSession.open(p[0])
    const getDone = new AbortController()
    const resultDone = new AbortController()
    const get = await session.on(p[1]).stream('get', getDone.signal)
    const taskId = await createTask(session, 'demo__ask_user', { message: 'Again?' })
    const request = await next(get, isElicitation)
    getDone.abort()
    const result = await session.on(p[2]).stream({ taskResult: taskId }, resultDone.signal)
    expect((await next(result, isElicitation)).id).toBe(request.id)
    expect((await session.on(p[1]).post({ jsonrpc: '2.0', id: request.id, result: { action: 'accept', content: { name: 'Bea' } } })).status).toBe(202)
    expect(await next(result, isFinal)).toMatchObject({ result: { content: [{ type: 'text', text: 'Hello, Bea!' }] } })
    resultDone.abort()
  })

  it('answers GW_ERR_PEER_LOST to a relayed request\'s answer once the process running the call is gone', async () => {
    const session = await RawSession.open(p[2])
    const call = messagesOf(await session.post({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'demo__ask_user', arguments: {} } }))
    const request = await next(call, isElicitation)
    await cluster.kill(2)
    const late = await session.on(p[0]).post({ jsonrpc: '2.0', id: request.id, result: { action: 'accept', content: { name: 'Late' } } })
    expect(late.status).toBe(503)
    expect(await late.json()).toMatchObject({ error: { code: -32603, message: 'the gateway process holding this tools/call is gone; start the request again' } })
  })
})
