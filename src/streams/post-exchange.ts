import type { OutgoingHttpHeader, ServerResponse } from 'node:http'
import type { Caller } from '../auth/access.ts'
import type { GatewayError } from '../errors.ts'
import { noteErrorCode } from '../wire/access-notes.ts'
import { errorResponse, writeHttpError } from '../wire/error-replies.ts'
import type { RequestId, RpcMessage, RpcResponse } from '../wire/jsonrpc.ts'
import { LazyAbort } from '../wire/lazy-abort.ts'
import type { EventStream } from './event-stream.ts'
import type { StreamHub } from './stream-hub.ts'

export interface ExchangeOptions {
  hub: StreamHub
  sessionId: string
  /** The request answered, for an error that refuses its stream. */
  requestId: RequestId
  headers: Record<string, string>
  /** Who sent the request: once the exchange waits (see `hold`), it lasts only as long as this caller's credential. */
  caller: Caller
  /** Told when the exchange was ended because its credential was revoked or expired (after `disconnected` aborted). */
  onRevoked?: ((err: GatewayError) => void) | undefined
}

/** The GW_ERR_* code a JSON-RPC error response carries in its `data` (see toWireError); undefined for any other. */
function gatewayCodeOf (message: RpcResponse): string | undefined {
  if (!('error' in message)) return undefined
  const code = (message.error.data as { code?: unknown } | null | undefined)?.code
  return typeof code === 'string' && code.startsWith('GW_ERR_') ? code : undefined
}

/**
 * The HTTP response to one POSTed request. It answers with plain JSON unless the request sends
 * something to the client before its result (progress, elicitation, …); then it turns into an SSE
 * stream that carries those messages and finally the response.
 */
export class PostExchange {
  readonly #res: ServerResponse
  readonly #options: ExchangeOptions
  #stream: EventStream | undefined
  #done = false
  readonly #disconnected = new LazyAbort()
  /** Once the exchange is held: ends its hold on the credential (see HeldExchanges). */
  #release: (() => void) | undefined

  constructor (res: ServerResponse, options: ExchangeOptions) {
    this.#res = res
    this.#options = options
    // A response closes once: `on` costs less than `once`, which wraps each listener.
    res.on('close', () => {
      this.#release?.()
      if (!this.#done || !res.writableFinished) this.#disconnected.abort(new Error('the client disconnected'))
    })
  }

  /**
   * Aborted when the client's connection closes before the response was written (also when the
   * gateway closed it because the client stopped reading, or refused its stream).
   */
  get disconnected (): AbortSignal {
    return this.#disconnected.signal
  }

  /** Whether `disconnected` has aborted, without making its signal. */
  get isDisconnected (): boolean {
    return this.#disconnected.aborted
  }

  /**
   * Holds the exchange on its caller's credential (see HeldExchanges) until it ends: revoked or expired
   * meanwhile, the request is answered with that error. Every exchange that waits is held: one that became
   * a stream, and one whose handler reads its abort signal (it waits for an upstream, a task or a client).
   */
  hold (): void {
    // Without auth there is no credential to revoke: nothing to register (not even a closure to make).
    if (this.#release !== undefined || this.#done || this.#options.caller.credential === undefined) return
    this.#release = this.#options.hub.exchanges.hold(this.#options.caller, (err) => { this.#revoked(err) })
  }

  /** Sends a message related to the request before its response; switches to SSE on first use. */
  emit (message: RpcMessage): void {
    if (this.#done) return
    this.#ensureStream(false).send(message)
  }

  respond (message: RpcResponse): void {
    if (this.#done) return
    this.#done = true
    this.#release?.()
    const code = gatewayCodeOf(message)
    if (code !== undefined) noteErrorCode(this.#res, code)
    if (this.#stream) {
      this.#stream.send(message)
      this.#options.hub.finishRequestStream(this.#stream)
      return
    }
    const body = JSON.stringify(message)
    // A flat list of names and values: no object to build (a spread of the exchange's headers costs more
    // than writing the whole answer).
    const head: OutgoingHttpHeader[] = ['content-type', 'application/json', 'content-length', Buffer.byteLength(body)]
    const headers = this.#options.headers
    for (const name in headers) head.push(name, headers[name]!)
    this.#res.writeHead(200, head)
    this.#res.end(body)
  }

  /**
   * Switches to SSE now, so a long wait keeps the connection alive and can carry messages later. Such a
   * stream counts against the session's limit; over it, the exchange ends at once with the HTTP error
   * (429) instead, and the handler learns it as if its client had gone away: `disconnected` aborts on
   * the next turn of the event loop, after the handler, still running synchronously, has installed its
   * listeners (a real disconnect arrives the same way, later).
   */
  openStream (): void {
    if (this.#done || this.#stream) return
    try {
      this.#ensureStream(true)
    } catch (err) {
      if (this.#res.headersSent) throw err
      this.#refuse(err)
    }
  }

  /** Ends without a response (the client cancelled the request, so none is expected). */
  abandon (): void {
    if (this.#done) return
    this.#done = true
    this.#release?.()
    this.#options.hub.finishRequestStream(this.#ensureStream(false))
  }

  /**
   * A stream that merely carries what the request sends before its result (progress, input requests)
   * is not `held`: it is not counted against the session's stream limit. It lasts as long as its request,
   * so request concurrency bounds it already, and it could not be refused cleanly anyway: the request
   * is running and has something to say. The stall timeout and buffer limit apply to it all the same.
   */
  #ensureStream (held: boolean): EventStream {
    if (this.#stream !== undefined) return this.#stream
    this.#stream = this.#options.hub.openRequestStream(this.#options.sessionId, this.#res, this.#options.headers, held)
    this.hold()
    return this.#stream
  }

  /**
   * The credential of the request was revoked or has expired: the request is answered with that error (its
   * stream, if it became one, ends: nothing later is written on it), and the handler learns it through
   * `disconnected` on the next turn of the event loop (as with a refused stream: a handler whose exchange
   * was revoked as it began to wait has installed its listeners by then).
   */
  #revoked (err: GatewayError): void {
    if (this.#done) return
    this.respond(errorResponse(this.#options.requestId, err))
    setImmediate(() => {
      this.#disconnected.abort(err)
      this.#options.onRevoked?.(err)
    })
  }

  #refuse (err: unknown): void {
    this.#done = true
    writeHttpError(this.#res, err, { id: this.#options.requestId, headers: this.#options.headers })
    setImmediate(() => this.#disconnected.abort(err))
  }
}
