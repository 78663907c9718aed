import { fetch as undiciFetch } from 'undici'
import { readSse } from './sse.ts'
import { until } from './until.ts'

type Json = Record<string, unknown>

export const TASKS_EXT = 'io.modelcontextprotocol/tasks'
const NAME_FIELD: Record<string, string> = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri', 'tasks/get': 'taskId', 'tasks/update': 'taskId', 'tasks/cancel': 'taskId' }

export interface ModernReply {
  status: number
  body: Json
  /** Notifications and other messages sent before the response on an SSE answer. */
  before: Json[]
}

/** A hand-driven 2026-07-28 client: every request carries its envelope and routing headers. */
export class ModernRaw {
  readonly url: string
  readonly capabilities: Json
  readonly #headers: Record<string, string>
  #nextId = 1

  constructor (url: string, capabilities: Json = {}, headers: Record<string, string> = {}) {
    this.url = url
    this.capabilities = capabilities
    this.#headers = headers
  }

  static withTasks (url: string, capabilities: Json = {}, headers: Record<string, string> = {}): ModernRaw {
    return new ModernRaw(url, { ...capabilities, extensions: { [TASKS_EXT]: {} } }, headers)
  }

  envelope (params: Json = {}): Json {
    return {
      ...params,
      _meta: {
        ...(params._meta as Json | undefined),
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': this.capabilities,
        'io.modelcontextprotocol/clientInfo': { name: 'modern-raw', version: '1' },
      },
    }
  }

  /** Sends a request with correct routing headers unless `headers` overrides them. */
  async request (
    method: string,
    params: Json = {},
    headers: Record<string, string | undefined> = {},
    signal?: AbortSignal,
  ): Promise<ModernReply> {
    const id = this.#nextId++
    const field = NAME_FIELD[method]
    const name = field === undefined ? undefined : params[field]
    const routing: Record<string, string | undefined> = {
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': method,
      ...(typeof name === 'string' && { 'mcp-name': name }),
      ...headers,
    }
    const res = await undiciFetch(this.url, {
      method: 'POST',
      headers: Object.fromEntries(Object.entries({ 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...this.#headers, ...routing }).filter((e): e is [string, string] => e[1] !== undefined)),
      body: JSON.stringify({ jsonrpc: '2.0', id, method, params: this.envelope(params) }),
      ...(signal && { signal }),
    })
    const before: Json[] = []
    if ((res.headers.get('content-type') ?? '').includes('text/event-stream')) {
      for await (const event of readSse(res.body as ReadableStream<Uint8Array>)) {
        if (event.data === '') continue
        const message = JSON.parse(event.data) as Json
        if (message.id === id) return { status: res.status, body: message, before }
        before.push(message)
      }
      throw new Error(`no response to ${method}`)
    }
    return { status: res.status, body: await res.json() as Json, before }
  }

  /** The result of a request that must succeed. */
  async result (method: string, params: Json = {}): Promise<Json> {
    const reply = await this.request(method, params)
    if (reply.body.error !== undefined) throw new Error(`${method} failed: ${JSON.stringify(reply.body.error)}`)
    return reply.body.result as Json
  }

  /** Polls tasks/get until the task has one of `statuses` (bounded). */
  async waitFor (taskId: string, statuses: string[]): Promise<Json> {
    let last: Json = {}
    return await until(`task ${taskId} reaching ${statuses.join('/')}`, async () => {
      last = await this.result('tasks/get', { taskId })
      return statuses.includes(String(last.status)) ? last : undefined
    }, { describeLast: () => `: ${JSON.stringify(last)}` })
  }
}
