import { setMaxListeners } from 'node:events'
import type { JSONRPCMessage, Transport, TransportSendOptions } from '@modelcontextprotocol/client'
import type { UpstreamRequester } from './credentials/credentialed-requests.ts'
import { encodeHeaderValue, MCP_NAME_SOURCE } from '../wire/mcp-name.ts'
import type { ArrivalInfo } from './call-attribution.ts'
import { upstreamHttpError } from './http-dispatcher.ts'
import { JsonStreamParser } from './json-stream-parser.ts'
import { isResponse, readEventStream, streamCursor, type EventStreamOptions, type StreamCursor, type StreamHost, type WireMessage } from './sse-stream-reader.ts'
import { firstReplay, followReplay, type Replayed, type ReplayAnswer } from './stream-replay.ts'
import { MAX_RECONNECT_MS, resumeFailedResponse, resumeUntilAnswered } from './stream-resume.ts'
import { decodeResumptionToken, encodeResumptionToken } from './resumption-token.ts'
import { limitFor, type ResponseLimit, type ResponseLimits } from './response-limit.ts'
import type { RequestId } from '../wire/jsonrpc.ts'
import { ignoreWithTrace } from '../observability/ignored.ts'
import type { Logger } from '../observability/logger.ts'

const PROTOCOL_VERSION_META_KEY = 'io.modelcontextprotocol/protocolVersion'

/** Reconnect attempts of the standalone GET stream before the transport reports an error. */
const GET_RETRIES = 3
/** How long the session's initialized notification waits for the server to answer the standalone stream's GET. */
const OPEN_WAIT_MS = 2000

export interface StreamableHttpTransportOptions {
  url: URL
  dispatcher: UpstreamRequester
  headers: Readonly<Record<string, string>>
  /**
   * Joins an upstream session another gateway process opened (its Mcp-Session-Id and negotiated version):
   * no handshake is made, and the request ids sent carry `idPrefix`, so that they never repeat the ids the
   * session's first owner used (the upstream may still be answering those).
   */
  rejoin?: { sessionId: string | null, protocolVersion: string, idPrefix: string } | undefined
  /** How large an answer may be: one over its limit is given up as it arrives (its response closed) and fails its request. */
  limits: ResponseLimits
  /** Where a DELETE that ends the upstream session on close is traced when it fails. */
  log?: Logger | undefined
}

type Message = WireMessage

/** The 2026-07-28 protocol version a request carries in its `_meta`; undefined for a request of the 2025 era. */
function modernVersionOf (msg: Message): string | undefined {
  const version = (msg.params?._meta as Record<string, unknown> | undefined)?.[PROTOCOL_VERSION_META_KEY]
  return typeof version === 'string' ? version : undefined
}

/**
 * The client side of Streamable HTTP, written directly on an undici dispatcher: no fetch, no web
 * streams, one small SSE parser on Buffers. It opens the standalone GET stream after the handshake, so
 * server→client requests that a server sends outside a call's stream still arrive.
 *
 * A response is handed on one macrotask after the messages before it: the SDK handles notifications a
 * tick later than responses, so this keeps a call's last progress notification ahead of its result.
 */
export class StreamableHttpTransport implements Transport {
  readonly hasPerRequestStream = true
  sessionId: string | undefined
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: Transport['onmessage']
  readonly #options: StreamableHttpTransportOptions
  readonly #path: string
  readonly #closed = new AbortController()
  #protocolVersion: string | undefined
  readonly #idPrefix: string | undefined
  /** Close without ending the upstream session (DELETE): another process goes on using it. */
  #keepSession = false
  /** What the SSE streams read here hand their messages to. */
  readonly #host: StreamHost
  /** Requests (by the SDK's id) whose closed response stream is being resumed: aborted when the request is cancelled. */
  readonly #resuming = new Map<unknown, AbortController>()

  constructor (options: StreamableHttpTransportOptions) {
    this.#options = options
    this.#path = `${options.url.pathname}${options.url.search}`
    if (options.rejoin !== undefined) {
      this.sessionId = options.rejoin.sessionId ?? undefined
      this.#protocolVersion = options.rejoin.protocolVersion
      this.#idPrefix = options.rejoin.idPrefix
    }
    // Every request in flight on the session listens to it: as many as the session's calls and reads.
    setMaxListeners(0, this.#closed.signal)
    this.#host = {
      closed: this.#closed.signal,
      limits: options.limits,
      deliver: (message, viaRequest) => { this.#deliver(message, viaRequest) },
      onerror: (error) => { this.onerror?.(error) },
    }
  }

  async start (): Promise<void> {}

  setProtocolVersion (version: string): void {
    this.#protocolVersion = version
  }

  /** The protocol version the session negotiated (sent as MCP-Protocol-Version); undefined before the handshake. */
  get protocolVersion (): string | undefined {
    return this.#protocolVersion
  }

  /** From now on, closing leaves the upstream session to the upstream (no DELETE): its tasks run on. */
  keepSession (): void {
    this.#keepSession = true
  }

  /** Closes the transport but leaves the upstream session to the upstream (no DELETE). */
  async detach (): Promise<void> {
    this.#keepSession = true
    await this.close()
  }

  async send (message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const msg = message as Message
    // A 2025-era request is cancelled with a notification (it has no request signal): its resumption ends with it.
    if (msg.method === 'notifications/cancelled') this.#resuming.get(msg.params?.requestId)?.abort()
    if (options?.resumptionToken !== undefined && msg.id !== undefined) return await this.#replay(msg, options.resumptionToken, options)
    if (msg.method === 'notifications/initialized') await this.#listenFirst()
    const headers = this.#headers('application/json, text/event-stream', options?.headers)
    headers['content-type'] = 'application/json'
    this.#bodyDerivedHeaders(headers, msg)
    const signal = options?.requestSignal ? AbortSignal.any([options.requestSignal, this.#closed.signal]) : this.#closed.signal
    const wireId = this.#idPrefix !== undefined && msg.method !== undefined && msg.id !== undefined ? `${this.#idPrefix}${String(msg.id)}` : msg.id
    const res = await this.#options.dispatcher.request({
      origin: this.#options.url.origin,
      path: this.#path,
      method: 'POST',
      headers,
      body: JSON.stringify(wireId === msg.id ? message : { ...msg, id: wireId }),
      signal,
    })
    const session = res.headers['mcp-session-id']
    if (typeof session === 'string') this.sessionId = session
    const type = String(res.headers['content-type'] ?? '')
    if (res.statusCode === 202) {
      await res.body.dump()
      return
    }
    if (res.statusCode >= 400) {
      const text = await res.body.text()
      if (type.includes('application/json') && this.#deliverErrorBody(text, msg)) return
      if (res.statusCode === 404 && this.sessionId !== undefined) void this.close()
      throw upstreamHttpError(res.statusCode, res.headers['retry-after'], text)
    }
    // Only a request's answer may be held to its call's tighter limit (a response POSTed upstream has the upstream's id).
    const limit = limitFor(this.#options.limits, msg.method === undefined ? undefined : msg.id as RequestId | undefined)
    if (type.includes('text/event-stream')) {
      const requestSignal = options?.requestSignal
      // Each event id of a request's stream is where another process could replay it from (resumption-token.ts).
      const onresumptiontoken = options?.onresumptiontoken
      const requestId = wireId as string | number
      const onEventId = onresumptiontoken === undefined
        ? undefined
        : (eventId: string) => { onresumptiontoken(encodeResumptionToken({ requestId, eventId })) }
      const isRequest = msg.method !== undefined && msg.id !== undefined
      const stream: EventStreamOptions = {
        limit,
        cursor: streamCursor(isRequest ? requestId : undefined),
        viaRequest: msg.id as string | number | undefined,
        requestSignal,
        onEventId,
      }
      // A 2026-07-28 response stream is not resumable: when it breaks, the request is lost.
      const resumable = isRequest && modernVersionOf(msg) === undefined
      // A stream the caller did not abort ended (a listen stream learns so that the upstream ended it); told
      // after the response that may have ended it, which is handed on a macrotask later (see #deliver).
      void this.#followStream(res.body, stream, resumable ? options : undefined).then(() => {
        setImmediate(() => { if (requestSignal?.aborted !== true && !this.#closed.signal.aborted) options?.onRequestStreamEnd?.() })
      })
      return
    }
    await this.#readJson(res.body, limit, msg.id as RequestId | undefined, options?.requestSignal, options?.onRequestStreamEnd)
  }

  async close (): Promise<void> {
    if (this.#closed.signal.aborted) return
    if (this.sessionId !== undefined && !this.#keepSession) {
      this.#options.dispatcher.request({
        origin: this.#options.url.origin,
        path: this.#path,
        method: 'DELETE',
        headers: this.#headers('application/json'),
        signal: AbortSignal.timeout(2000),
      }).then(async (res) => { await res.body.dump() }).catch(ignoreWithTrace(this.#options.log, 'ending an upstream session (DELETE) failed; the upstream ends it when it expires'))
    }
    this.#closed.abort()
    this.onclose?.()
  }

  /** The configured headers, with `extra` (a caller's own Authorization, say) replacing those of the same name in any case. */
  #headers (accept: string, extra?: Readonly<Record<string, string>>): Record<string, string> {
    const extraNames = new Set(Object.keys(extra ?? {}).map((name) => name.toLowerCase()))
    const configured = Object.fromEntries(Object.entries(this.#options.headers).filter(([name]) => !extraNames.has(name.toLowerCase())))
    const headers: Record<string, string> = { ...configured, ...extra, accept }
    if (this.sessionId !== undefined) headers['mcp-session-id'] = this.sessionId
    if (this.#protocolVersion !== undefined) headers['mcp-protocol-version'] = this.#protocolVersion
    return headers
  }

  /** Modern-era requests carry their version, method and name in headers too. */
  #bodyDerivedHeaders (headers: Record<string, string>, msg: Message): void {
    if (typeof msg.method !== 'string' || msg.id === undefined) return
    const version = modernVersionOf(msg)
    if (version === undefined) return
    headers['mcp-protocol-version'] = version
    headers['mcp-method'] = msg.method
    const field = MCP_NAME_SOURCE[msg.method]
    const name = field === undefined ? undefined : msg.params?.[field]
    if (typeof name === 'string') headers['mcp-name'] = encodeHeaderValue(name)
  }

  /** An HTTP error whose body is the JSON-RPC error for the request: hand it on, keeping its code. */
  #deliverErrorBody (text: string, msg: Message): boolean {
    try {
      const body = JSON.parse(text) as Message & { error?: unknown }
      if (body.error === undefined || msg.id === undefined) return false
      this.#deliver({ ...body, id: msg.id } as Message)
      return true
    } catch {
      return false
    }
  }

  /**
   * A JSON body: one message (or a batch) or, as some servers stream a `subscriptions/listen` response,
   * messages written one after the other as things happen. Resolves once the first message was handed on
   * (or the body ended empty); the rest is read on. A body that is not JSON fails the request, and so does one
   * over its limit, as soon as it passes it (the response is closed: the rest is never read).
   */
  async #readJson (
    body: AsyncIterable<Buffer>,
    limit: ResponseLimit,
    id: RequestId | undefined,
    requestSignal: AbortSignal | undefined,
    onEnd: (() => void) | undefined,
  ): Promise<void> {
    let handedOn = false
    let delivered: () => void = () => {}
    const first = new Promise<void>((resolve) => { delivered = resolve })
    const take = (text: string): void => {
      const parsed = JSON.parse(text) as Message | Message[]
      for (const item of Array.isArray(parsed) ? parsed : [parsed]) this.#deliver(item)
      handedOn = true
      delivered()
    }
    const read = (async () => {
      const parser = new JsonStreamParser(take, {
        maxValueBytes: limit.bytes,
        onTooLarge: (seen) => {
          const tooLarge = limit.exceeded(seen)
          this.#options.limits.onTooLarge?.(tooLarge, id)
          throw tooLarge
        },
      })
      for await (const chunk of body) parser.push(chunk)
      const rest = parser.end()
      if (rest !== '') take(rest)
    })()
    // A failure before the first message fails the request (below); one after it is the transport's.
    read.then(() => {
      delivered()
      setImmediate(() => { if (requestSignal?.aborted !== true && !this.#closed.signal.aborted) onEnd?.() })
    }, (err: unknown) => {
      if (handedOn && !this.#closed.signal.aborted && requestSignal?.aborted !== true) {
        this.onerror?.(err instanceof Error ? err : new Error(String(err)))
      }
    })
    await Promise.race([first, read])
  }

  /** `viaRequest`: the request on whose response stream the message arrived. */
  #deliver (message: Message, viaRequest?: string | number): void {
    if (isResponse(message)) {
      const id = message.id
      // A rejoined session's own request ids go out prefixed: the SDK knows them by its own numbers.
      const own = this.#idPrefix !== undefined && typeof id === 'string' && id.startsWith(this.#idPrefix) ? { ...message, id: Number(id.slice(this.#idPrefix.length)) } : message
      setImmediate(() => this.onmessage?.(own as Message))
    } else this.onmessage?.(message, viaRequest === undefined ? undefined : { viaRequest } satisfies ArrivalInfo as never)
  }

  /**
   * Reads the rest of a request's stream that another gateway process started (a call it ran, which this one
   * adopted): a GET with Last-Event-ID on the same session, whose replay ends with the call's response. The
   * response carries the call's first id and is handed on under `msg`'s; notifications of the replay (progress
   * and log messages the first process may have passed on already) are dropped, requests of the upstream
   * (elicitation, sampling) go to the call.
   */
  async #replay (msg: Message, token: string, options: TransportSendOptions): Promise<void> {
    const position = decodeResumptionToken(token)
    if (position === undefined) throw new Error('not a resumption token of this gateway')
    const replayed: Replayed = { from: position.requestId, to: msg.id as string | number, answered: false }
    const limit = limitFor(this.#options.limits, replayed.to)
    const res = await firstReplay(async () => await this.#replayFrom(position.eventId, options), this.#closed.signal)
    if (res.statusCode !== 200) throw upstreamHttpError(res.statusCode, undefined, res.text)
    void followReplay({
      body: res.body!,
      from: position.eventId,
      replayed,
      gone: () => this.#closed.signal.aborted || options.requestSignal?.aborted === true,
      closed: this.#closed.signal,
      read: async (body, last, quiet) => {
        const cursor = streamCursor(undefined, last)
        const requestSignal = options.requestSignal
        await readEventStream(this.#host, body, { limit, cursor, viaRequest: replayed.to, requestSignal, onEventId: quiet, replayed })
        return cursor.lastEventId
      },
      reopen: async (last, waited) => await this.#replayFrom(last, options, waited),
      deliver: (message) => { this.#deliver(message as Message) },
    })
  }

  /** A GET for the events after `eventId`: the SSE body, or the status and text of a refusal; `waited` gives up on the answer. */
  async #replayFrom (eventId: string, options: TransportSendOptions, waited?: AbortSignal): Promise<ReplayAnswer> {
    const headers = this.#headers('text/event-stream', options.headers)
    headers['last-event-id'] = eventId
    const signal = AbortSignal.any([options.requestSignal, this.#closed.signal, waited].filter((s) => s !== undefined))
    const res = await this.#options.dispatcher.request({ origin: this.#options.url.origin, path: this.#path, method: 'GET', headers, signal })
    const type = String(res.headers['content-type'] ?? '')
    if (res.statusCode === 200 && type.includes('text/event-stream')) return { statusCode: 200, text: '', body: res.body }
    const text = await res.body.text()
    return { statusCode: res.statusCode === 200 ? 502 : res.statusCode, text: text === '' ? `no replay (${type || 'no content type'})` : text, body: undefined }
  }

  /**
   * Reads a request's SSE response stream. `resume` (the request's send options; a 2025-era request only):
   * when the upstream closes the stream before the answer, after an event id, the stream is resumed on this
   * session with GET and Last-Event-ID (SSE polling, see stream-resume.ts) until the answer comes, or the
   * request fails with why it could not be.
   */
  async #followStream (body: AsyncIterable<Buffer>, stream: EventStreamOptions, resume: TransportSendOptions | undefined): Promise<void> {
    const { cursor, requestSignal, viaRequest } = stream
    // Known from the start: a request cancelled while its first stream is open is not resumed once it closes.
    const cancelled = resume === undefined ? undefined : new AbortController()
    if (cancelled !== undefined) this.#resuming.set(viaRequest, cancelled)
    try {
      await readEventStream(this.#host, body, stream)
      if (resume === undefined || cancelled === undefined || cursor.answered || cursor.answerOf === undefined) return
      const signal = AbortSignal.any([cancelled.signal, this.#closed.signal, ...(requestSignal === undefined ? [] : [requestSignal])])
      await resumeUntilAnswered({
        cursor,
        signal,
        open: async (lastEventId, opened) => await this.#replayFrom(lastEventId, resume, opened),
        read: async (resumed) => { await readEventStream(this.#host, resumed, { ...stream, requestSignal: signal, endWithAnswer: true }) },
        fail: (failure) => { this.#deliver(resumeFailedResponse(cursor.answerOf!, failure) as Message) },
      })
    } finally {
      if (cancelled !== undefined && this.#resuming.get(viaRequest) === cancelled) this.#resuming.delete(viaRequest)
    }
  }

  /**
   * Opens the standalone stream before the server learns that the session is initialized, and waits until the
   * server answered it (at most OPEN_WAIT_MS): what the server sends at once (server-everything asks for roots)
   * has a stream to go to, where an SDK server drops it while none is open.
   */
  async #listenFirst (): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    await new Promise<void>((resolve) => {
      timer = setTimeout(resolve, OPEN_WAIT_MS)
      void this.#listen(0, streamCursor(undefined), resolve)
    })
    clearTimeout(timer)
  }

  /**
   * The standalone GET stream; 405 means the server offers none. Reconnects with Last-Event-ID, after the
   * time the server asked for (`retry:`) or, without one, after 250 ms doubled for each failure in a row.
   */
  async #listen (attempt: number, cursor: StreamCursor, answered?: () => void): Promise<void> {
    if (this.#closed.signal.aborted) return answered?.()
    try {
      const headers = this.#headers('text/event-stream')
      if (cursor.lastEventId !== undefined) headers['last-event-id'] = cursor.lastEventId
      const res = await this.#options.dispatcher.request({ origin: this.#options.url.origin, path: this.#path, method: 'GET', headers, signal: this.#closed.signal })
      answered?.()
      if (res.statusCode === 405) {
        await res.body.dump()
        return
      }
      if (res.statusCode !== 200) {
        await res.body.dump()
        throw new Error(`standalone SSE stream answered HTTP ${res.statusCode}`)
      }
      await readEventStream(this.#host, res.body, { limit: limitFor(this.#options.limits, undefined), cursor })
      attempt = 0
    } catch (err) {
      answered?.()
      if (this.#closed.signal.aborted) return
      if (attempt >= GET_RETRIES) {
        this.onerror?.(err instanceof Error ? err : new Error(String(err)))
        return
      }
    }
    if (this.#closed.signal.aborted) return
    const wait = Math.min((cursor.retryMs ?? 250) * 2 ** attempt, MAX_RECONNECT_MS)
    setTimeout(() => { void this.#listen(attempt + 1, cursor) }, wait).unref()
  }
}
