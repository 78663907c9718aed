import type { ServerResponse } from 'node:http'
import { SseConnection } from '../../http/sse-connection.ts'
import type { RequestContext } from '../../dispatch/context.ts'
import type { RpcMessage, RpcResponse } from '../jsonrpc.ts'
import type { EventStream } from './event-stream.ts'
import type { StreamHub } from './stream-hub.ts'

export interface ExchangeOptions {
  hub: StreamHub
  sessionId: string
  keepAliveMs: number
  headers: Record<string, string>
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
  readonly #disconnected = new AbortController()

  constructor (res: ServerResponse, options: ExchangeOptions) {
    this.#res = res
    this.#options = options
    res.once('close', () => {
      if (!this.#done || !res.writableFinished) this.#disconnected.abort(new Error('the client disconnected'))
    })
  }

  /** Aborted when the client's connection closes before the response was written. */
  get disconnected (): AbortSignal {
    return this.#disconnected.signal
  }

  /** Sends a message related to the request before its response; switches to SSE on first use. */
  emit (message: RpcMessage): void {
    if (this.#done) return
    this.#ensureStream().send(message)
  }

  respond (message: RpcResponse): void {
    if (this.#done) return
    this.#done = true
    if (this.#stream) {
      this.#stream.send(message)
      this.#options.hub.finishRequestStream(this.#stream)
      return
    }
    const body = JSON.stringify(message)
    this.#res.writeHead(200, {
      ...this.#options.headers,
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    })
    this.#res.end(body)
  }

  /** Switches to SSE now, so a long wait keeps the connection alive and can carry messages later. */
  openStream (): void {
    if (!this.#done) this.#ensureStream()
  }

  /** Ends without a response (the client cancelled the request, so none is expected). */
  abandon (): void {
    if (this.#done) return
    this.#done = true
    this.#options.hub.finishRequestStream(this.#ensureStream())
  }

  #ensureStream (): EventStream {
    if (!this.#stream) {
      const connection = new SseConnection(this.#res, { keepAliveMs: this.#options.keepAliveMs, headers: this.#options.headers })
      this.#stream = this.#options.hub.openRequestStream(this.#options.sessionId, connection)
    }
    return this.#stream
  }
}

/** The parts of a request's context that write to its exchange; the same in both eras. */
export function exchangeChannel (exchange: PostExchange): Pick<RequestContext, 'disconnected' | 'send' | 'openStream' | 'notify'> {
  return {
    disconnected: exchange.disconnected,
    send: (message) => exchange.emit(message),
    openStream: () => exchange.openStream(),
    notify: (method, params) => exchange.emit({ jsonrpc: '2.0', method, params }),
  }
}
