// A deliberately thin MCP client over raw HTTP (undici keep-alive Pool): initialize and
// notifications/initialized by hand, then POSTed JSON-RPC requests whose answer may come as a JSON
// body or as an SSE stream. The same code drives the direct and the gateway path, so the client-side
// cost is small and identical for both.
import { Pool } from 'undici'
import type { PreparedRequest } from './loadgen.ts'

export const PROTOCOL_VERSION = '2025-11-25'
/** A call that has no answer by then fails the bench (a hang is a finding, not something to wait out). */
export const CALL_TIMEOUT_MS = 30_000

interface RpcAnswer {
  id?: unknown
  result?: Record<string, unknown>
  error?: { code?: number, message?: string }
}

/** The JSON-RPC answer with `id` out of a JSON or SSE body; notifications on the stream are skipped. */
export function parseAnswer (contentType: string, text: string, id: number): RpcAnswer {
  if (!contentType.startsWith('text/event-stream')) return JSON.parse(text) as RpcAnswer
  for (const event of text.split(/\r?\n\r?\n/)) {
    let data = ''
    for (const line of event.split(/\r?\n/)) {
      if (line.startsWith('data:')) data += (data === '' ? '' : '\n') + line.slice(line.startsWith('data: ') ? 6 : 5)
    }
    if (data === '') continue
    const message = JSON.parse(data) as RpcAnswer
    if (message.id === id && ('result' in message || 'error' in message)) return message
  }
  throw new Error(`SSE body has no answer for request ${id}: ${text.slice(0, 300)}`)
}

/** What the task sections need of a client: creating tasks and reading their status. */
export interface TaskClient {
  createTask (tool: string, args: Record<string, unknown>, ttlMs: number): Promise<string>
  getTask (taskId: string): Promise<string>
}

export function openPool (url: URL, connections: number): Pool {
  return new Pool(url.origin, {
    connections,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    headersTimeout: CALL_TIMEOUT_MS,
    bodyTimeout: CALL_TIMEOUT_MS,
  })
}

export class McpHttpSession implements TaskClient {
  readonly url: URL
  readonly #pool: Pool
  readonly #headers: Record<string, string>
  /** False for a session attached to another process: closing it leaves the session alone. */
  readonly #owned: boolean
  #nextId = 1

  private constructor (url: URL, pool: Pool, sessionId: string, owned = true, extra: Record<string, string> = {}) {
    this.url = url
    this.#pool = pool
    this.#owned = owned
    this.#headers = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-session-id': sessionId,
      'mcp-protocol-version': PROTOCOL_VERSION,
      ...extra,
    }
  }

  get sessionId (): string {
    return this.#headers['mcp-session-id']!
  }

  /**
   * Opens a pool of `connections` keep-alive sockets and an MCP session on it; `extra` headers go with every
   * request of the session (`authorization` for a gateway with auth on).
   */
  static async open (endpoint: string, connections: number, extra: Record<string, string> = {}): Promise<McpHttpSession> {
    const url = new URL(endpoint)
    const pool = openPool(url, connections)
    try {
      const body = JSON.stringify({
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'mcp-task-gateway-bench', version: '0.0.0' } },
      })
      const res = await pool.request({
        path: url.pathname,
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...extra },
        body,
      })
      const text = await res.body.text()
      if (res.statusCode !== 200) throw new Error(`initialize at ${endpoint}: HTTP ${res.statusCode} ${text.slice(0, 300)}`)
      const sessionId = res.headers['mcp-session-id']
      if (typeof sessionId !== 'string') throw new Error(`initialize at ${endpoint}: no Mcp-Session-Id header`)
      const answer = parseAnswer(String(res.headers['content-type'] ?? ''), text, 0)
      if (answer.error) throw new Error(`initialize at ${endpoint}: ${answer.error.message ?? JSON.stringify(answer.error)}`)
      const session = new McpHttpSession(url, pool, sessionId, true, extra)
      const ack = await pool.request({
        path: url.pathname,
        method: 'POST',
        headers: session.#headers,
        body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
      })
      await ack.body.dump()
      if (ack.statusCode !== 202 && ack.statusCode !== 200) throw new Error(`notifications/initialized at ${endpoint}: HTTP ${ack.statusCode}`)
      return session
    } catch (err) {
      await pool.close()
      throw err
    }
  }

  /**
   * The same session through another gateway process (one sharing the store, which holds the session):
   * its own pool of `connections` sockets to `endpoint`. Closing it closes the sockets only.
   */
  static attach (endpoint: string, sessionId: string, connections: number): McpHttpSession {
    const url = new URL(endpoint)
    return new McpHttpSession(url, openPool(url, connections), sessionId, false)
  }

  /** Sends one request and returns its result; a JSON-RPC error or a non-200 status throws. */
  async request (method: string, params: Record<string, unknown>): Promise<Record<string, unknown>> {
    const id = this.#nextId++
    let res, text
    try {
      res = await this.#pool.request({
        path: this.url.pathname,
        method: 'POST',
        headers: this.#headers,
        body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
      })
      text = await res.body.text()
    } catch (err) {
      const timedOut = err instanceof Error && /Timeout/.test(err.name)
      throw new Error(`${method} to ${this.url.href}: ${timedOut ? `no answer within ${CALL_TIMEOUT_MS} ms` : String(err)}`, { cause: err })
    }
    if (res.statusCode !== 200) throw new Error(`${method}: HTTP ${res.statusCode} ${text.slice(0, 300)}`)
    const answer = parseAnswer(String(res.headers['content-type'] ?? ''), text, id)
    if (answer.error) throw new Error(`${method}: JSON-RPC error ${answer.error.code ?? '?'} ${answer.error.message ?? ''}`)
    if (answer.id !== id || answer.result === undefined) throw new Error(`${method}: unexpected answer ${text.slice(0, 300)}`)
    return answer.result
  }

  /** One request's answer as it came: its content type and the JSON-RPC answer (the Fastify floor's template). */
  async answerOf (method: string, params: Record<string, unknown>): Promise<{ contentType: string, answer: Record<string, unknown> }> {
    const id = this.#nextId++
    const res = await this.#pool.request({
      path: this.url.pathname,
      method: 'POST',
      headers: this.#headers,
      body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
    })
    const text = await res.body.text()
    if (res.statusCode !== 200) throw new Error(`${method}: HTTP ${res.statusCode} ${text.slice(0, 300)}`)
    const contentType = String(res.headers['content-type'] ?? '')
    return { contentType, answer: parseAnswer(contentType, text, id) as Record<string, unknown> }
  }

  /** One request of this session built once, for the load generator to send again and again (bench/lib/loadgen.ts). */
  prepare (method: string, params: Record<string, unknown>): PreparedRequest {
    return {
      origin: this.url.origin,
      path: this.url.pathname,
      method: 'POST',
      headers: { ...this.#headers },
      body: JSON.stringify({ jsonrpc: '2.0', id: this.#nextId++, method, params }),
    }
  }

  /** Calls a tool that echoes `text` and checks the echo, so a fast wrong answer never counts as a call. */
  async echo (tool: string, text: string): Promise<void> {
    const result = await this.request('tools/call', { name: tool, arguments: { text } })
    const content = result.content as Array<{ type?: string, text?: string }> | undefined
    if (result.isError === true || content?.[0]?.text !== text) throw new Error(`${tool}: unexpected result ${JSON.stringify(result).slice(0, 300)}`)
  }

  /**
   * Calls a tool as a task (2025-11-25: `params.task`) and returns the new task's id; anything but a
   * CreateTaskResult with a fresh `working` task throws, so a fast wrong answer never counts.
   */
  async createTask (tool: string, args: Record<string, unknown>, ttlMs: number): Promise<string> {
    const result = await this.request('tools/call', { name: tool, arguments: args, task: { ttl: ttlMs } })
    const task = result.task as { taskId?: unknown, status?: unknown } | undefined
    if (typeof task?.taskId !== 'string' || task.status !== 'working') throw new Error(`${tool} as a task: unexpected result ${JSON.stringify(result).slice(0, 300)}`)
    return task.taskId
  }

  /** `tasks/get`; returns the task's status after checking that the answer is about `taskId`. */
  async getTask (taskId: string): Promise<string> {
    const result = await this.request('tasks/get', { taskId })
    if (result.taskId !== taskId || typeof result.status !== 'string') throw new Error(`tasks/get: unexpected result ${JSON.stringify(result).slice(0, 300)}`)
    return result.status
  }

  /** Ends the session (DELETE) and closes the sockets; never throws. An attached session only closes its sockets. */
  async close (): Promise<void> {
    if (!this.#owned) {
      await this.#pool.close().catch(() => {})
      return
    }
    try {
      // No content-type: the DELETE has no body, and the gateway answers 400 (empty JSON body) to one
      // that declares application/json, leaving the session and its upstream sessions open.
      const { 'content-type': _, ...headers } = this.#headers
      const res = await this.#pool.request({ path: this.url.pathname, method: 'DELETE', headers })
      await res.body.dump()
    } catch {
      // best effort: the server may already be gone
    }
    await this.#pool.close().catch(() => {})
  }
}
