import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { ResponseMessage } from '@modelcontextprotocol/sdk/experimental/tasks'
import {
  CallToolResultSchema,
  ErrorCode,
  McpError,
  TaskStatusNotificationSchema,
  type CallToolResult,
  type JSONRPCMessage,
} from '@modelcontextprotocol/sdk/types.js'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { initializeRaw, MCP_HEADERS, readSse } from '../helpers/sse.ts'

const RELATED_TASK = 'io.modelcontextprotocol/related-task'

/** The native-task fixture, driven directly (no gateway): the reference behaviour of a v1 SDK task server. */
describe('native-task-upstream fixture (v1 SDK task API)', () => {
  let upstream: StartedUpstream
  let client: Client
  const elicitations: Array<Record<string, unknown>> = []
  const statuses: string[] = []

  beforeAll(async () => {
    upstream = await startUpstream('test/fixtures/native-task-upstream.ts', ['--port', '0'])
    client = await connectV1(upstream.url, {
      onElicit: (params) => {
        elicitations.push(params)
        return { action: 'accept', content: { approve: true } }
      },
    })
    client.setNotificationHandler(TaskStatusNotificationSchema, (n) => { statuses.push(`${n.params.taskId}:${n.params.status}`) })
  })

  afterAll(async () => {
    await client?.close()
    await upstream?.close()
  })

  async function collect (name: string, args: Record<string, unknown>,
    onCreated?: (taskId: string) => Promise<void>): Promise<Array<ResponseMessage<CallToolResult>>> {
    const seen: Array<ResponseMessage<CallToolResult>> = []
    const stream = client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, { task: { ttl: 60_000 } })
    for await (const message of stream) {
      seen.push(message)
      if (message.type === 'taskCreated' && onCreated) await onCreated(message.task.taskId)
    }
    return seen
  }

  it('declares task capabilities and per-tool task support', async () => {
    expect(client.getServerCapabilities()?.tasks).toEqual({ list: {}, cancel: {}, requests: { tools: { call: {} } } })
    const tools = Object.fromEntries((await client.listTools()).tools.map((t) => [t.name, t.execution?.taskSupport]))
    expect(tools).toEqual({ native_job: 'required', native_slow: 'required', native_either: 'optional', native_cancellations: 'forbidden', plain_echo: 'forbidden' })
    expect(textOf(await client.callTool({ name: 'plain_echo', arguments: { text: 'hi' } }))).toBe('hi')
  })

  it('runs native_job as a task whose elicitation arrives through tasks/result', async () => {
    const seen = await collect('native_job', { ms: 100 })
    const created = seen[0]
    if (created?.type !== 'taskCreated') throw new Error(`expected taskCreated first, got ${JSON.stringify(created)}`)
    const taskId = created.task.taskId
    expect(created.task).toMatchObject({ status: 'working', ttl: 60_000, pollInterval: 200 })
    expect(seen.filter((m) => m.type === 'taskStatus').map((m) => m.task.status)).toContain('input_required')

    const last = seen.at(-1)
    if (last?.type !== 'result') throw new Error(`expected a result last, got ${JSON.stringify(last)}`)
    expect(textOf(last.result)).toContain('native_job approved=true')
    expect(last.result._meta?.[RELATED_TASK]).toEqual({ taskId })

    expect(elicitations).toHaveLength(1)
    expect(elicitations[0]).toMatchObject({ mode: 'form', _meta: { [RELATED_TASK]: { taskId } } })

    expect(await client.experimental.tasks.getTask(taskId)).toMatchObject({ status: 'completed', statusMessage: 'approval answered: accept' })
    expect(textOf(await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema))).toContain('approved=true')
    expect(statuses).toEqual(expect.arrayContaining([`${taskId}:input_required`, `${taskId}:working`, `${taskId}:completed`]))
  })

  it('stops native_slow when the task is cancelled, and records it', async () => {
    let cancelled: { taskId: string, status: string } | undefined
    const seen = await collect('native_slow', { ms: 20_000, steps: 100 }, async (taskId) => {
      cancelled = await client.experimental.tasks.cancelTask(taskId)
    })
    if (cancelled === undefined) throw new Error('no task was created')
    const { taskId } = cancelled
    expect(cancelled.status).toBe('cancelled')
    expect(seen.at(-1)).toMatchObject({ type: 'error' })
    expect(await client.experimental.tasks.getTask(taskId)).toMatchObject({ status: 'cancelled' })

    let recorded: Array<{ taskId: string, tool: string }> = []
    for (let i = 0; i < 50 && !recorded.some((c) => c.taskId === taskId); i++) {
      recorded = JSON.parse(textOf(await client.callTool({ name: 'native_cancellations', arguments: {} }))) as typeof recorded
    }
    expect(recorded).toContainEqual(expect.objectContaining({ taskId, tool: 'native_slow', reason: 'Client cancelled task execution.' }))
    await expect(client.experimental.tasks.cancelTask(taskId)).rejects.toMatchObject({ code: ErrorCode.InvalidParams })
  })

  it('refuses native_job without task augmentation', async () => {
    // The v1 client refuses on its own once it has seen taskSupport 'required' in tools/list ...
    await expect(client.callTool({ name: 'native_job', arguments: {} })).rejects.toBeInstanceOf(McpError)
    // ... and the server answers a plain tools/call with JSON-RPC -32601 (not an isError result).
    const error = await client.request({ method: 'tools/call', params: { name: 'native_job', arguments: {} } }, CallToolResultSchema)
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(McpError)
    expect((error as McpError).code).toBe(ErrorCode.MethodNotFound)
  })

  it('on the wire: CreateTaskResult, then the elicitation on the tasks/result stream, never on GET', async () => {
    const session = await initializeRaw(upstream.url, { elicitation: { form: {} } })
    const headers = { ...MCP_HEADERS, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' }
    const post = async (message: unknown): Promise<Response> =>
      await fetch(upstream.url, { method: 'POST', headers, body: JSON.stringify(message) })
    /** The JSON-RPC messages of one POST's SSE answer, up to and including the response to `id`. */
    const exchange = async function * (message: { id: number, [key: string]: unknown }): AsyncGenerator<JSONRPCMessage> {
      const res = await post(message)
      expect(res.headers.get('content-type')).toContain('text/event-stream')
      if (res.body === null) throw new Error('no body')
      for await (const event of readSse(res.body)) {
        const parsed = JSON.parse(event.data) as JSONRPCMessage
        yield parsed
        if ('id' in parsed && parsed.id === message.id && !('method' in parsed)) return
      }
    }
    expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202)

    const getStream: JSONRPCMessage[] = []
    const stopGet = new AbortController()
    const get = await fetch(upstream.url, { headers: { accept: 'text/event-stream', 'mcp-session-id': session }, signal: stopGet.signal })
    const reading = (async () => {
      if (get.body === null) return
      for await (const event of readSse(get.body)) getStream.push(JSON.parse(event.data) as JSONRPCMessage)
    })().catch(() => {})

    const call: unknown[] = []
    for await (const m of exchange({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'native_job', arguments: { ms: 50 }, task: { ttl: 30_000 } } })) call.push(m)
    expect(call).toHaveLength(1)
    const created = call[0] as { result: { task: { taskId: string, status: string, ttl: number } } }
    expect(created.result.task).toMatchObject({ status: 'working', ttl: 30_000 })
    expect(Object.keys(created.result)).toEqual(['task'])
    const taskId = created.result.task.taskId

    const onResultStream: JSONRPCMessage[] = []
    for await (const m of exchange({ jsonrpc: '2.0', id: 2, method: 'tasks/result', params: { taskId } })) {
      onResultStream.push(m)
      if ('method' in m && m.method === 'elicitation/create' && 'id' in m) {
        expect(m.params?._meta).toEqual({ [RELATED_TASK]: { taskId } })
        const answer = await post({ jsonrpc: '2.0', id: m.id, result: { action: 'accept', content: { approve: true } } })
        expect(answer.status).toBe(202)
      }
    }
    expect(onResultStream.map((m) => ('method' in m ? m.method : 'response'))).toEqual(['elicitation/create', 'response'])
    expect(onResultStream[1]).toMatchObject({
      id: 2,
      result: { content: [{ type: 'text', text: expect.stringContaining('approved=true') }], _meta: { [RELATED_TASK]: { taskId } } },
    })

    stopGet.abort()
    await reading
    expect(new Set(getStream.map((m) => ('method' in m ? m.method : 'response')))).toEqual(new Set(['notifications/tasks/status']))
    expect(getStream.map((m) => ('params' in m ? m.params?.status : undefined))).toEqual(['input_required', 'working', 'completed'])
    await fetch(upstream.url, { method: 'DELETE', headers: { 'mcp-session-id': session } })
  })
})
