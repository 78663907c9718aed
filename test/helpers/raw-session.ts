import { Agent, fetch as undiciFetch } from 'undici'
import { readSse } from './sse.ts'
import { until } from './until.ts'

type Json = Record<string, unknown>

/**
 * A hand-driven legacy session over raw HTTP, for wire-level task tests: every request can go over a
 * fresh TCP connection, and SSE streams are read event by event.
 */
export class RawSession {
  readonly url: string
  sessionId = ''
  #nextId = 1
  readonly #headers: Record<string, string>

  constructor (url: string, headers: Record<string, string> = {}) {
    this.url = url
    this.#headers = headers
  }

  static async open (
    url: string,
    capabilities: Json = { elicitation: { form: {} } },
    headers: Record<string, string> = {},
  ): Promise<RawSession> {
    const session = new RawSession(url, headers)
    const res = await session.post({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities, clientInfo: { name: 'raw', version: '1' } } })
    if (res.status !== 200) throw new Error(`initialize failed: HTTP ${res.status} ${await res.text()}`)
    await res.text()
    session.sessionId = res.headers.get('mcp-session-id') ?? ''
    await (await session.post({ jsonrpc: '2.0', method: 'notifications/initialized' })).text()
    return session
  }

  /** The same session, with every request sent to `url` (another gateway process of a cluster). */
  on (url: string): RawSession {
    const other = new RawSession(url, this.#headers)
    other.sessionId = this.sessionId
    return other
  }

  /** POSTs a message; `fresh` sends it over a new TCP connection. */
  async post (body: Json, options: { fresh?: boolean, signal?: AbortSignal, headers?: Record<string, string> } = {}) {
    const dispatcher = options.fresh ? new Agent({ pipelining: 0 }) : undefined
    return await undiciFetch(this.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...this.#headers,
        ...(this.sessionId !== '' && { 'mcp-session-id': this.sessionId }),
        ...options.headers,
      },
      body: JSON.stringify(body),
      ...(options.signal && { signal: options.signal }),
      ...(dispatcher && { dispatcher }),
    })
  }

  /** Sends a request and returns its JSON-RPC response (reading an SSE answer to its end). */
  async request (method: string, params: Json = {}): Promise<Json> {
    const id = this.#nextId++
    const res = await this.post({ jsonrpc: '2.0', id, method, params })
    if ((res.headers.get('content-type') ?? '').includes('text/event-stream')) {
      for await (const event of readSse(res.body as ReadableStream<Uint8Array>)) {
        if (event.data === '') continue
        const message = JSON.parse(event.data) as Json
        if (message.id === id) return message
      }
      throw new Error(`no response to ${method}`)
    }
    return await res.json() as Json
  }

  /** Opens a stream (a tasks/result POST or the GET stream) and returns an iterator of its messages. */
  async stream (kind: { taskResult: string } | 'get', signal: AbortSignal): Promise<AsyncGenerator<Json>> {
    const res = kind === 'get'
      ? await undiciFetch(this.url, { headers: { accept: 'text/event-stream', 'mcp-session-id': this.sessionId, ...this.#headers }, signal })
      : await this.post({ jsonrpc: '2.0', id: this.#nextId++, method: 'tasks/result', params: { taskId: kind.taskResult } }, { signal })
    async function * messages (): AsyncGenerator<Json> {
      for await (const event of readSse(res.body as ReadableStream<Uint8Array>)) {
        if (event.data !== '') yield JSON.parse(event.data) as Json
      }
    }
    return messages()
  }

  /** Ends the session (DELETE); throws unless the gateway confirms it. */
  async close (): Promise<void> {
    const res = await undiciFetch(this.url, { method: 'DELETE', headers: { 'mcp-session-id': this.sessionId, ...this.#headers } })
    await res.text()
    if (res.status !== 200) throw new Error(`DELETE failed: HTTP ${res.status}`)
  }

  /** Polls tasks/get until the task reaches one of `statuses` (bounded). */
  async waitFor (taskId: string, statuses: string[]): Promise<Json> {
    let last: Json = {}
    return await until(`task ${taskId} reaching ${statuses.join('/')}`, async () => {
      last = await this.request('tasks/get', { taskId })
      const task = last.result as Json | undefined
      return task && statuses.includes(String(task.status)) ? task : undefined
    }, { describeLast: () => `: ${JSON.stringify(last)}` })
  }
}

/** Calls a tool as a 2025-11-25 task on `session` and returns the task's id (throws with the response when none was created). */
export async function legacyTask (session: RawSession, name: string, args: Json = {}, ttl = 60_000): Promise<string> {
  const response = await session.request('tools/call', { name, arguments: args, task: { ttl } })
  const taskId = ((response.result as Json | undefined)?.task as Json | undefined)?.taskId
  if (typeof taskId !== 'string') throw new Error(`${name} created no task: ${JSON.stringify(response)}`)
  return taskId
}

/** Reads a stream until `predicate` holds; returns everything read, the matching message last. */
export async function readUntil (stream: AsyncGenerator<Json>, predicate: (message: Json) => boolean): Promise<Json[]> {
  const seen: Json[] = []
  for (;;) {
    const { value, done } = await stream.next()
    if (done) throw new Error(`the stream ended after ${JSON.stringify(seen)}`)
    seen.push(value)
    if (predicate(value)) return seen
  }
}

/** The first message of a stream that satisfies `predicate`. */
export async function next (stream: AsyncGenerator<Json>, predicate: (message: Json) => boolean): Promise<Json> {
  for (;;) {
    const { value, done } = await stream.next()
    if (done) throw new Error('the stream ended')
    if (predicate(value)) return value
  }
}
