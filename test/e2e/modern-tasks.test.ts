import { describe, expect, it } from 'vitest'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { createApplicationInputHandler, createTaskSessionFromClient, DispatchError, resultFromTaskOutcome } from '@modelcontextprotocol/ext-tasks/client'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { textOf } from '../helpers/clients.ts'
import { demoStdio, gatewayForSuite } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { readSse } from '../helpers/sse.ts'

type Json = Record<string, unknown>
const TOKEN = 'modern-tasks-token'
const AUTH = { authorization: `Bearer ${TOKEN}` }

/** The tasks extension (2026-07-28): server-decided tasks, DetailedTask, tasks/update, listen notifications. */
describe('tasks for 2026-07-28 clients', () => {
  const gw = gatewayForSuite({
    upstreams: [demoStdio({ toolSettings: { list_roots: { taskSupport: 'required' }, echo: { taskSupport: 'forbidden' } } })],
    auth: { tokens: [{ principal: 'ops', sha256: sha256Hex(TOKEN) }] },
    tasks: { decide: 'always', pollInterval: '50ms' },
  })

  it('turns task-eligible calls into flat task handles (decide: always), never forbidden ones', async () => {
    const client = ModernRaw.withTasks(gw.url, {}, AUTH)
    const handle = await client.result('tools/call', { name: 'demo__slow', arguments: { duration: 300, steps: 2 } })
    expect(handle).toMatchObject({ resultType: 'task', status: 'working', ttlMs: 3_600_000, pollIntervalMs: 50 })
    expect(handle.task).toBeUndefined()
    const done = await client.waitFor(String(handle.taskId), ['completed'])
    expect(done).toMatchObject({ resultType: 'complete', result: { resultType: 'complete', content: [{ text: expect.stringContaining('2 steps') }] } })
    expect(done.result).not.toHaveProperty('_meta.io.modelcontextprotocol/related-task')
    expect(await client.result('tools/call', { name: 'demo__echo', arguments: { text: 'never a task' } })).toMatchObject({ content: [{ text: 'never a task' }] })
  })

  it('shows input requests in tasks/get and takes the answers through tasks/update', async () => {
    const client = ModernRaw.withTasks(gw.url, { elicitation: { form: {} } }, AUTH)
    const handle = await client.result('tools/call', { name: 'demo__ask_user', arguments: { message: 'Modern name?' } })
    const taskId = String(handle.taskId)
    const waiting = await client.waitFor(taskId, ['input_required'])
    const [key, request] = Object.entries(waiting.inputRequests as Json)[0]!
    expect(request).toMatchObject({ method: 'elicitation/create', params: { message: 'Modern name?' } })
    expect(await client.result('tasks/update', { taskId, inputResponses: { 'not-a-key': { action: 'decline' } } })).toEqual({ resultType: 'complete' })
    expect((await client.result('tasks/get', { taskId })).status).toBe('input_required')
    await client.result('tasks/update', { taskId, inputResponses: { [key]: { action: 'accept', content: { name: 'Update' } } } })
    expect(await client.waitFor(taskId, ['completed'])).toMatchObject({ result: { content: [{ text: 'Hello, Update!' }] } })
  })

  it('renders isError results as completed, JSON-RPC errors as failed, and acknowledges cancels', async () => {
    const client = ModernRaw.withTasks(gw.url, {}, AUTH)
    const tool = await client.result('tools/call', { name: 'demo__fail_tool', arguments: { reason: 'no disk' } })
    expect(await client.waitFor(String(tool.taskId), ['completed'])).toMatchObject({ result: { isError: true, content: [{ text: expect.stringContaining('no disk') }] } })
    const legacy = await RawSession.open(gw.url, {}, AUTH)
    const thrown = await legacy.request('tools/call', { name: 'demo__throw_error', arguments: { code: -32011, message: 'quota' }, task: {} })
    const thrownId = ((thrown.result as Json).task as Json).taskId as string
    await legacy.waitFor(thrownId, ['failed'])
    expect(await client.result('tasks/get', { taskId: thrownId })).toMatchObject({ status: 'failed', error: { code: -32011, message: 'quota' } })
    const created = await client.result('tools/call', { name: 'demo__slow', arguments: { duration: 5000, steps: 5 } })
    await client.waitFor(String(created.taskId), ['working'])
    await client.result('tasks/cancel', { taskId: String(created.taskId) })
    expect((await client.waitFor(String(created.taskId), ['cancelled'])).status).toBe('cancelled')
    expect(await client.result('tasks/cancel', { taskId: String(created.taskId) })).toEqual({ resultType: 'complete' })
  })

  it('refuses task methods without the extension and methods the extension removed', async () => {
    const plain = new ModernRaw(gw.url, {}, AUTH)
    const get = await plain.request('tasks/get', { taskId: 'x' })
    expect(get.status).toBe(400)
    expect(get.body.error).toMatchObject({ code: -32021, data: { requiredCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } } })
    const required = await plain.request('tools/call', { name: 'demo__list_roots', arguments: {} })
    expect(required.body.error).toMatchObject({ code: -32021 })
    const tasks = ModernRaw.withTasks(gw.url, {}, AUTH)
    for (const method of ['tasks/result', 'tasks/list']) expect((await tasks.request(method, { taskId: 'x' })).body.error).toMatchObject({ code: -32601 })
    expect((await tasks.request('tasks/get', { taskId: 'unknown-task' })).body.error).toMatchObject({ code: -32602 })
  })

  it('lets a modern client read and cancel a task created through the 2025-11-25 flow', async () => {
    const legacy = await RawSession.open(gw.url, {}, AUTH)
    const created = await legacy.request('tools/call', { name: 'demo__fail_tool', arguments: { reason: 'legacy isError' }, task: {} })
    const taskId = ((created.result as Json).task as Json).taskId as string
    expect((await legacy.waitFor(taskId, ['failed'])).status).toBe('failed')
    const modern = ModernRaw.withTasks(gw.url, {}, AUTH)
    expect(await modern.result('tasks/get', { taskId })).toMatchObject({ status: 'completed', result: { isError: true } })
    const running = await legacy.request('tools/call', { name: 'demo__slow', arguments: { duration: 5000, steps: 5 }, task: {} })
    const runningId = ((running.result as Json).task as Json).taskId as string
    await modern.result('tasks/cancel', { taskId: runningId })
    expect((await legacy.waitFor(runningId, ['cancelled'])).status).toBe('cancelled')
  })

  it('sends notifications/tasks on a subscriptions/listen stream that asked for the task', async () => {
    const client = ModernRaw.withTasks(gw.url, {}, AUTH)
    const handle = await client.result('tools/call', { name: 'demo__slow', arguments: { duration: 400, steps: 2 } })
    const taskId = String(handle.taskId)
    const controller = new AbortController()
    const res = await fetch(gw.url, {
      method: 'POST',
      signal: controller.signal,
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'subscriptions/listen', ...AUTH },
      body: JSON.stringify({ jsonrpc: '2.0', id: 77, method: 'subscriptions/listen', params: client.envelope({ notifications: { taskIds: [taskId, 'someone-elses'], toolsListChanged: true } }) }),
    })
    const messages: Json[] = []
    for await (const event of readSse(res.body!)) {
      if (event.data === '') continue
      const message = JSON.parse(event.data) as Json
      messages.push(message)
      if (message.method === 'notifications/tasks' && (message.params as Json).status === 'completed') break
    }
    controller.abort()
    expect(messages[0]).toMatchObject({ method: 'notifications/subscriptions/acknowledged', params: { notifications: { taskIds: [taskId], toolsListChanged: true }, _meta: { 'io.modelcontextprotocol/subscriptionId': 77 } } })
    expect(messages.at(-1)).toMatchObject({ params: { taskId, status: 'completed', result: { content: [{ type: 'text' }] }, _meta: { 'io.modelcontextprotocol/subscriptionId': 77 } } })
  })

  it('works with the ext-tasks requester (modern generation, raw dispatch)', async () => {
    const clientInfo = { name: 'ext-tasks-e2e', version: '1' }
    const clientCapabilities = { elicitation: { form: {} } }
    const client = new Client(clientInfo, { capabilities: clientCapabilities, versionNegotiation: { mode: { pin: '2026-07-28' } } })
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.url), { requestInit: { headers: AUTH } }))
    let nextId = 1
    const rawDispatch = async (
      request: { method: string, params?: Json },
      options: { signal?: AbortSignal, context?: { headers?: Record<string, string> } } = {},
    ) => {
      const body = { jsonrpc: '2.0', id: `raw-${nextId++}`, ...request }
      // ext-tasks supplies Mcp-Name for tasks/* in context.headers; tools/call gets it here.
      const name = request.method === 'tools/call' ? request.params?.name : undefined
      const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': request.method, ...AUTH, ...(typeof name === 'string' && { 'mcp-name': name }), ...options.context?.headers }
      const res = await fetch(gw.url, { method: 'POST', headers, body: JSON.stringify(body), ...(options.signal && { signal: options.signal }) })
      const text = await res.text()
      const messages = (res.headers.get('content-type') ?? '').includes('text/event-stream')
        ? text.split('\n').filter((l) => l.startsWith('data:') && l.length > 6).map((l) => JSON.parse(l.slice(5)) as Json)
        : [JSON.parse(text) as Json]
      const message = messages.find((m) => m.id === body.id)
      if (!message) throw new DispatchError(`HTTP ${res.status}: ${text.slice(0, 200)}`, res.status >= 500)
      return message.error !== undefined ? { kind: 'error' as const, error: message.error } : { kind: 'result' as const, result: message.result }
    }
    const session = createTaskSessionFromClient(client, {
      endpointId: 'gateway-e2e',
      rawDispatch: rawDispatch as never,
      v2RequestFraming: { protocolVersion: '2026-07-28', clientInfo, clientCapabilities },
      onInputRequest: createApplicationInputHandler({
        elicitation: async () => ({ action: 'accept', content: { name: 'Ext Tasks' } }),
        sampling: async () => { throw new Error('no sampling here') },
        roots: async () => ({ roots: [] }),
      }),
    })
    const execution = await session.callTool('demo__ask_user', { message: 'ext?' }, { task: { preference: 'prefer' } })
    const { outcome } = await execution.settle()
    expect(outcome.status, JSON.stringify(outcome)).toBe('completed')
    expect(textOf(resultFromTaskOutcome(outcome))).toContain('Hello, Ext Tasks!')
    await session.close()
    await client.close()
  })
})

/** `tasks.decide: { after, input: round }`: quick calls and input rounds stay synchronous; a call that keeps running becomes a task. */
describe('the decision window for 2026-07-28 tasks', () => {
  // Wide enough that a loaded machine still answers the quick calls within it; the long call outlasts it.
  const gw = gatewayForSuite({ upstreams: [demoStdio()], tasks: { decide: { after: '2s', input: 'round' }, pollInterval: '50ms' } })

  it('answers a quick call directly, resolves input by MRTR first, and returns a task for a long call', async () => {
    // A plain call first, so an idle upstream connection is ready and the quick call is really quick.
    await new ModernRaw(gw.url, { elicitation: { form: {} } }).result('tools/call', { name: 'demo__echo', arguments: { text: 'warm' } })
    const client = ModernRaw.withTasks(gw.url, { elicitation: { form: {} } })
    expect(await client.result('tools/call', { name: 'demo__slow', arguments: { duration: 5, steps: 1 } })).toMatchObject({ resultType: 'complete' })
    const round = await client.result('tools/call', { name: 'demo__ask_user', arguments: {} })
    expect(round).toMatchObject({ resultType: 'input_required' })
    expect(round.taskId).toBeUndefined()
    const [key] = Object.keys(round.inputRequests as Json)
    const answered = await client.result('tools/call', { name: 'demo__ask_user', arguments: {}, inputResponses: { [key!]: { action: 'accept', content: { name: 'Window' } } }, requestState: round.requestState })
    expect(answered).toMatchObject({ resultType: 'complete', content: [{ text: 'Hello, Window!' }] })
    const long = await client.result('tools/call', { name: 'demo__slow', arguments: { duration: 5000, steps: 3 } })
    expect(long).toMatchObject({ resultType: 'task', status: 'working' })
    expect(await client.waitFor(String(long.taskId), ['completed'])).toMatchObject({ result: { content: [{ text: expect.stringContaining('3 steps') }] } })
  })
})
