import type { Caller } from '../auth/access.ts'
import type { ClientRequest, RequestContext } from '../dispatch/context.ts'
import type { Logger } from '../observability/logger.ts'
import type { RequestTrace } from '../observability/request-trace.ts'
import type { ClientRef } from '../upstream/client-ref.ts'
import type { JsonObject, RequestId, RpcMessage } from '../wire/jsonrpc.ts'
import type { LazyAbort } from '../wire/lazy-abort.ts'
import type { PostExchange } from './post-exchange.ts'

/** What a request's context is made of, in either era. */
export interface ExchangeContextInit {
  client: ClientRef
  clientCapabilities: JsonObject
  sessionId: string | undefined
  caller: Caller
  requestId: RequestId
  progressToken: RequestId | undefined
  log: Logger
  trace: RequestTrace | undefined
  /** The request's own abort (2025 era: `notifications/cancelled` and shutdown reach it there). */
  abort: LazyAbort | undefined
  /** Without `abort`: the request stops when its client disconnects or the gateway shuts down. */
  shutdown: AbortSignal
  /** How a server→client request reaches the client; undefined where the era has none (2026-07-28). */
  ask: ((method: string, params: JsonObject, signal: AbortSignal, emit: (message: RpcMessage) => void) => Promise<JsonObject>) | undefined
}

/**
 * The context of one request answered over one POST exchange. It is made for every request, so it is a
 * class: its methods live on the prototype, and its signals are made only when a handler reads them (most
 * requests, `tasks/get` and lists, never do).
 */
export class ExchangeContext implements RequestContext {
  readonly client: ClientRef
  readonly clientCapabilities: JsonObject
  readonly sessionId: string | undefined
  readonly caller: Caller
  readonly requestId: RequestId
  readonly progressToken: RequestId | undefined
  readonly log: Logger
  readonly trace: RequestTrace | undefined
  readonly #exchange: PostExchange
  readonly #init: ExchangeContextInit
  #signal: AbortSignal | undefined
  #request: ClientRequest | undefined

  constructor (exchange: PostExchange, init: ExchangeContextInit) {
    this.client = init.client
    this.clientCapabilities = init.clientCapabilities
    this.sessionId = init.sessionId
    this.caller = init.caller
    this.requestId = init.requestId
    this.progressToken = init.progressToken
    this.log = init.log
    this.trace = init.trace
    this.#exchange = exchange
    this.#init = init
  }

  /** A handler that reads it waits on something: the exchange is held on the caller's credential from then on. */
  get signal (): AbortSignal {
    this.#exchange.hold()
    const abort = this.#init.abort
    if (abort !== undefined) return abort.signal
    this.#signal ??= AbortSignal.any([this.#exchange.disconnected, this.#init.shutdown])
    return this.#signal
  }

  get disconnected (): AbortSignal {
    return this.#exchange.disconnected
  }

  /** A function of its own (callers may hold it apart from the context); undefined where the era has none. */
  get request (): ClientRequest | undefined {
    const ask = this.#init.ask
    if (ask === undefined) return undefined
    const exchange = this.#exchange
    this.#request ??= (method, params, signal) => ask(method, params, signal, (message) => { exchange.emit(message) })
    return this.#request
  }

  openStream (): void {
    this.#exchange.openStream()
  }

  send (message: RpcMessage): void {
    this.#exchange.emit(message)
  }

  notify (method: string, params: JsonObject): void {
    this.#exchange.emit({ jsonrpc: '2.0', method, params })
  }
}
