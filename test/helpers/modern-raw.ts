import type { FastifyInstance } from 'fastify'
import { fetch as undiciFetch } from 'undici'
import { sseMessages } from './inject.ts'
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

/**
 * A hand-driven 2026-07-28 client: every request carries its envelope and routing headers. It talks over HTTP
 * to a URL, or to a gateway's app through inject() (no socket; an SSE answer is read once it has ended).
 */
export class ModernRaw {
  /** The gateway's MCP URL; empty for a client that talks to an app through inject(). */
  readonly url: string
  readonly capabilities: Json
  readonly #app: FastifyInstance | undefined
  readonly #headers: Record<string, string>
  #nextId = 1

  constructor (target: string | FastifyInstance, capabilities: Json = {}, headers: Record<string, string> = {}) {
    this.url = typeof target === 'string' ? target : ''
    this.#app = typeof target === 'string' ? undefined : target
    this.capabilities = capabilities
    this.#headers = headers
  }

  static withTasks (target: string | FastifyInstance, capabilities: Json = {}, headers: Record<string, string> = {}): ModernRaw {
    return new ModernRaw(target, { ...capabilities, extensions: { [TASKS_EXT]: {} } }, headers)
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
    const all = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...this.#headers, ...routing }
    const sent = Object.fromEntries(Object.entries(all).filter((e): e is [string, string] => e[1] !== undefined))
    const body = JSON.stringify({ jsonrpc: '2.0', id, method, params: this.envelope(params) })
    const before: Json[] = []
    if (this.#app !== undefined) {
      if (signal !== undefined) throw new Error('a request through inject() cannot be aborted: give ModernRaw a URL')
      const res = await this.#app.inject({ method: 'POST', url: '/mcp', headers: sent, payload: body })
      if (!String(res.headers['content-type'] ?? '').includes('text/event-stream')) return { status: res.statusCode, body: res.json<Json>(), before }
      for (const message of sseMessages(res.body)) {
        if (message.id === id) return { status: res.statusCode, body: message, before }
        before.push(message)
      }
      throw new Error(`no response to ${method}`)
    }
    const res = await undiciFetch(this.url, { method: 'POST', headers: sent, body, ...(signal && { signal }) })
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
