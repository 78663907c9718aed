// A thin 2026-07-28 client over raw HTTP (undici keep-alive Pool), the counterpart of McpHttpSession: no
// initialize and no session; every request carries its envelope (`_meta` with the protocol version, the client
// capabilities and info) and the routing headers MCP-Protocol-Version, Mcp-Method and Mcp-Name, exactly as
// test/helpers/modern-raw.ts sends them. With `tasks`, it declares the tasks extension.
import type { Pool } from 'undici'
import type { PreparedRequest } from './loadgen.ts'
import { CALL_TIMEOUT_MS, openPool, parseAnswer, type TaskClient } from './mcp-http.ts'

export const MODERN_VERSION = '2026-07-28'
const TASKS_EXT = 'io.modelcontextprotocol/tasks'
/** The param each method names in Mcp-Name. */
const NAME_FIELD: Record<string, string> = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri', 'tasks/get': 'taskId', 'tasks/update': 'taskId', 'tasks/cancel': 'taskId' }

export class ModernHttpClient implements TaskClient {
  readonly url: URL
  readonly #pool: Pool
  readonly #capabilities: Record<string, unknown>
  readonly #extra: Record<string, string>
  #nextId = 1

  /**
   * `tasks`: declare the tasks extension (a tools/call may then be answered with a task; needed for tasks/*);
   * `headers`: sent with every request (`authorization` for a gateway with auth on).
   */
  constructor (endpoint: string, connections: number, { tasks, headers = {} }: { tasks: boolean, headers?: Record<string, string> }) {
    this.url = new URL(endpoint)
    this.#pool = openPool(this.url, connections)
    this.#capabilities = tasks ? { extensions: { [TASKS_EXT]: {} } } : {}
    this.#extra = headers
  }

  /** One request of this client built once (a fresh JSON-RPC id), for the load generator or to send now. */
  prepare (method: string, params: Record<string, unknown>): PreparedRequest {
    const field = NAME_FIELD[method]
    const name = field === undefined ? undefined : params[field]
    const _meta = {
      'io.modelcontextprotocol/protocolVersion': MODERN_VERSION,
      'io.modelcontextprotocol/clientCapabilities': this.#capabilities,
      'io.modelcontextprotocol/clientInfo': { name: 'mcp-task-gateway-bench', version: '0.0.0' },
    }
    return {
      origin: this.url.origin,
      path: this.url.pathname,
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN_VERSION,
        'mcp-method': method,
        ...(typeof name === 'string' && { 'mcp-name': name }),
        ...this.#extra,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: this.#nextId++, method, params: { ...params, _meta } }),
    }
  }

  /** One request's answer as it came: its content type and the JSON-RPC answer (the Fastify floor's template). */
  async answerOf (method: string, params: Record<string, unknown>): Promise<{ contentType: string, answer: Record<string, unknown> }> {
    const prepared = this.prepare(method, params)
    const id = (JSON.parse(prepared.body!) as { id: number }).id
    let res, text
    try {
      res = await this.#pool.request({ path: prepared.path, method: 'POST', headers: prepared.headers, body: prepared.body })
      text = await res.body.text()
    } catch (err) {
      const timedOut = err instanceof Error && /Timeout/.test(err.name)
      throw new Error(`${method} to ${this.url.href}: ${timedOut ? `no answer within ${CALL_TIMEOUT_MS} ms` : String(err)}`, { cause: err })
    }
    if (res.statusCode !== 200) throw new Error(`${method} (${MODERN_VERSION}): HTTP ${res.statusCode} ${text.slice(0, 300)}`)
    const contentType = String(res.headers['content-type'] ?? '')
    return { contentType, answer: parseAnswer(contentType, text, id) as Record<string, unknown> }
  }

  /** Sends one request and returns its result; a JSON-RPC error or a non-200 status throws. */
  async request (method: string, params: Record<string, unknown>): Promise<Record<string, unknown>> {
    const { answer } = await this.answerOf(method, params)
    const error = answer.error as { code?: number, message?: string } | undefined
    if (error !== undefined) throw new Error(`${method} (${MODERN_VERSION}): JSON-RPC error ${error.code ?? '?'} ${error.message ?? ''}`)
    if (answer.result === undefined) throw new Error(`${method} (${MODERN_VERSION}): unexpected answer ${JSON.stringify(answer).slice(0, 300)}`)
    return answer.result as Record<string, unknown>
  }

  /**
   * Calls a tool on a gateway that makes every task-eligible call a task (`tasks.decide: always`) and returns
   * the task's id; anything but the flat task handle of a `working` task throws. The extension has no way to ask
   * for a ttl: the gateway's `tasks.defaultTtl` (1 h, as long as the bench asks of 2025-11-25 tasks) applies.
   */
  async createTask (tool: string, args: Record<string, unknown>): Promise<string> {
    const result = await this.request('tools/call', { name: tool, arguments: args })
    if (result.resultType !== 'task' || typeof result.taskId !== 'string' || result.status !== 'working') {
      throw new Error(`${tool} as a ${MODERN_VERSION} task: unexpected result ${JSON.stringify(result).slice(0, 300)}`)
    }
    return result.taskId
  }

  /** `tasks/get`; returns the task's status after checking that the answer is about `taskId`. */
  async getTask (taskId: string): Promise<string> {
    const result = await this.request('tasks/get', { taskId })
    if (result.taskId !== taskId || typeof result.status !== 'string') throw new Error(`tasks/get: unexpected result ${JSON.stringify(result).slice(0, 300)}`)
    return result.status
  }

  /** Closes the sockets (there is no session to end); never throws. */
  async close (): Promise<void> {
    await this.#pool.close().catch(() => {})
  }
}
