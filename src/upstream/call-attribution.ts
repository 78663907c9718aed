import type { JSONRPCMessage, Transport, TransportSendOptions } from '@modelcontextprotocol/client'
import type { JsonObject, RequestId } from '../wire/jsonrpc.ts'
import { InflightCall, type CallSink } from './inflight-call.ts'
import { shieldErrorData } from './upstream-errors.ts'

/** Server→client requests an upstream may send while a call runs. */
export const INPUT_METHODS = ['elicitation/create', 'sampling/createMessage', 'roots/list'] as const
export type InputMethod = typeof INPUT_METHODS[number]

export function isInputMethod (method: string): method is InputMethod {
  return (INPUT_METHODS as readonly string[]).includes(method)
}

/** Names the call a request is sent for; read and removed by AttributingTransport, never sent upstream. */
const CALL_HEADER = 'x-mcp-gateway-call'
/** Marks a message that arrived on the response stream of a call's request (Streamable HTTP). */
const VIA_KEY = 'io.mcp-task-gateway/call'
const RELATED_TASK = 'io.modelcontextprotocol/related-task'
/** The arrival tag of a message on the stream of a request whose call has ended (call ids start at 1). */
const NO_CALL = 0
/** How many requests of ended calls are remembered (see CallRegistry.#endedRequests). */
const ENDED_REQUESTS_KEPT = 256

/** What a transport knows about where an incoming message arrived: on the response stream of one request. */
export interface ArrivalInfo {
  viaRequest?: RequestId
}

/**
 * Result of attribution: a call (`exact` when the upstream named it, else chosen by rule 4 or 5), none in
 * flight, or calls of several clients (refused).
 */
export type Attribution = { call: InflightCall, exact: boolean } | 'none' | 'ambiguous'

/**
 * The calls in flight on one upstream session, and the rules that give what the upstream sends during them
 * (elicitation, sampling, roots, progress, log messages) to one call:
 *
 * 1. a message that arrived on the response stream of a call's request (Streamable HTTP) is that call's;
 * 2. else the call whose upstream task `_meta["io.modelcontextprotocol/related-task"]` names (or, for
 *    `notifications/tasks/status`, its `taskId`);
 * 3. else the call whose request `_meta.progressToken` names (a request's progress token is its id);
 * 4. else, on a transport with a response stream per request (Streamable HTTP) of a 2025-era client's session
 *    (`exactOnly`), no call: the upstream sends what a call asks on that call's stream, so what comes on its
 *    session stream is the session's (the client's session stream gets it);
 * 5. else (stdio, HTTP+SSE: nothing on the wire names a call; a 2026-07-28 client, which can be asked only
 *    during a call) the only call in flight;
 * 6. else, when every call in flight belongs to one client, the most recently started call that is not
 *    already waiting for an answer (an upstream usually asks soon after the call that asks starts; the
 *    newest call when all wait); calls of several clients: nobody (the upstream is refused).
 *
 * A request given to a call by rule 5 or 6 (a guess) stays where it was offered when that call's offers
 * outlive it (a 2025-era live relay, answered by id on any stream); else it is given again when that call
 * ends while the request is still unanswered (it was not that call's: a call does not end while its own
 * request waits).
 *
 * Progress notifications are routed by the SDK by their token and never come here.
 */
export class CallRegistry {
  readonly #calls = new Map<number, InflightCall>()
  readonly #ends = new Map<number, AbortController>()
  readonly #byRequest = new Map<RequestId, InflightCall>()
  /** The requests each call sent that have no response yet: forgotten with the call. */
  readonly #requestsOf = new Map<number, Set<RequestId>>()
  /**
   * Requests of calls that ended unanswered, newest last and at most ENDED_REQUESTS_KEPT of them: what still
   * arrives on their response streams belongs to no call (and must not be guessed onto another one).
   */
  readonly #endedRequests = new Set<RequestId>()
  #next = 1
  /**
   * Nothing is given to a call by guess: the transport has a response stream per request (Streamable HTTP) and the
   * session's client has a session stream to be asked on (a 2025-era session).
   */
  exactOnly = false

  get size (): number {
    return this.#calls.size
  }

  begin (owner: string, sink: CallSink, maxResultBytes?: number): InflightCall {
    const call = new InflightCall(this.#next++, owner, sink, maxResultBytes)
    this.#calls.set(call.id, call)
    return call
  }

  end (call: InflightCall): void {
    this.#calls.delete(call.id)
    // A cancelled request gets no response (the upstream drops it): nothing else would forget it.
    for (const id of this.#requestsOf.get(call.id) ?? []) {
      this.#byRequest.delete(id)
      this.#endedRequests.add(id)
      if (this.#endedRequests.size > ENDED_REQUESTS_KEPT) this.#endedRequests.delete(this.#endedRequests.values().next().value!)
    }
    this.#requestsOf.delete(call.id)
    const end = this.#ends.get(call.id)
    if (end === undefined) return
    this.#ends.delete(call.id)
    end.abort(new Error('the call ended'))
  }

  /** Aborted once `call` has ended (made on first use: most calls never need it). */
  ended (call: InflightCall): AbortSignal {
    if (!this.#calls.has(call.id)) return AbortSignal.abort(new Error('the call ended'))
    let end = this.#ends.get(call.id)
    if (end === undefined) {
      end = new AbortController()
      this.#ends.set(call.id, end)
    }
    return end.signal
  }

  /** Transport headers that tie a request to `call`. */
  headers (call: InflightCall | undefined, extra: Record<string, string> | undefined): Record<string, string> | undefined {
    if (call === undefined) return extra
    if (extra === undefined) return { [CALL_HEADER]: String(call.id) }
    // Object.assign, not a spread: a spread that adds a key costs about a microsecond on every call.
    const headers = Object.assign({}, extra)
    headers[CALL_HEADER] = String(call.id)
    return headers
  }

  /** `method`: what the upstream sent (a status notification of an upstream task names the task in its params). */
  attribute (params: JsonObject | undefined, method?: string): Attribution {
    const meta = params?._meta as JsonObject | undefined
    const via = meta?.[VIA_KEY]
    if (typeof via === 'number') {
      const call = this.#calls.get(via)
      return call === undefined ? 'none' : { call, exact: true }
    }
    const related = meta?.[RELATED_TASK] as JsonObject | undefined
    const taskId = related?.taskId ?? (method === 'notifications/tasks/status' ? params?.taskId : undefined)
    if (typeof taskId === 'string') {
      for (const call of this.#calls.values()) if (call.upstreamTaskId === taskId) return { call, exact: true }
    }
    const token = meta?.progressToken
    if (typeof token === 'number' || typeof token === 'string') {
      const call = this.#byRequest.get(token)
      if (call !== undefined) return { call, exact: true }
    }
    if (this.#calls.size === 0 || this.exactOnly) return 'none'
    const calls = [...this.#calls.values()]
    if (calls.length === 1) return { call: calls[0]!, exact: false }
    if (new Set(calls.map((c) => c.owner)).size > 1) return 'ambiguous'
    return { call: calls.findLast((c) => !c.awaitingClient) ?? calls.at(-1)!, exact: false }
  }

  /** Called by the transport: a request went out; `headers` may name its call. Returns the headers to send. */
  sent (id: RequestId, headers: Readonly<Record<string, string>> | undefined): Readonly<Record<string, string>> | undefined {
    const tag = headers?.[CALL_HEADER]
    if (tag === undefined) return headers
    const call = this.#calls.get(Number(tag))
    if (call !== undefined) {
      this.#byRequest.set(id, call)
      const requests = this.#requestsOf.get(call.id) ?? new Set<RequestId>()
      this.#requestsOf.set(call.id, requests.add(id))
    }
    if (Object.keys(headers!).length === 1) return undefined
    const { [CALL_HEADER]: _tag, ...rest } = headers!
    return rest
  }

  /** The largest result the answer to request `id` may carry: its call's maxResultBytes (a task's call), if any. */
  resultLimitOf (id: RequestId): number | undefined {
    return this.#byRequest.get(id)?.maxResultBytes
  }

  /** Whether request `id` belongs to a call another gateway process goes on with (its cancellation is not sent). */
  handedOver (id: RequestId): boolean {
    return this.#byRequest.get(id)?.handedOver === true
  }

  /** Called by the transport with every response: the call whose request it answers screens its result (see InflightCall.screenResults). */
  screen (response: JsonObject): void {
    const result = response.result
    if (result === null || typeof result !== 'object' || Array.isArray(result)) return
    const call = this.#byRequest.get(response.id as RequestId)
    if (call !== undefined) response.result = call.screened(result as JsonObject)
  }

  /** Called by the transport once the response to request `id` was handed on. */
  answered (id: RequestId): void {
    const call = this.#byRequest.get(id)
    if (call === undefined) return
    this.#byRequest.delete(id)
    this.#requestsOf.get(call.id)?.delete(id)
  }

  /**
   * Tags a message that arrived on the response stream of request `via` with that request's call. Not progress:
   * the SDK routes it by its token, and relays its params as they are (a tag would reach the client).
   */
  tagArrival (message: MessageShape, via: RequestId): void {
    if (typeof message.method !== 'string' || message.method === 'notifications/progress') return
    const call = this.#byRequest.get(via)
    const callId = call?.id ?? (this.#endedRequests.has(via) ? NO_CALL : undefined)
    if (callId === undefined) return
    const params = message.params ?? {}
    message.params = { ...params, _meta: { ...(params._meta as JsonObject | undefined), [VIA_KEY]: callId } }
  }
}

/** `params` without the gateway's arrival tag: what the upstream sent, to relay as it was. */
export function untagged (params: JsonObject): JsonObject {
  const meta = params._meta as JsonObject | undefined
  if (meta === undefined || !(VIA_KEY in meta)) return params
  const { [VIA_KEY]: _tag, ...rest } = meta
  const copy: JsonObject = { ...params }
  if (Object.keys(rest).length > 0) copy._meta = rest
  else delete copy._meta
  return copy
}

type MessageShape = { id?: RequestId, method?: string, params?: JsonObject }

function isResponse (message: MessageShape): boolean {
  return message.method === undefined && message.id !== undefined
}

/**
 * Wraps the transport of one upstream session: records which call each request is sent for, tags what
 * arrives on a request's own response stream with that call, and forgets a request once answered.
 *
 * With `delayResponses`, a response is handed on one macrotask after the messages before it: the SDK
 * handles notifications a tick later than responses, so without this a call's last progress notification
 * could lose the race against its result and be dropped (the Streamable HTTP transport does this itself).
 */
export class AttributingTransport implements Transport {
  readonly #inner: Transport
  readonly #calls: CallRegistry
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: Transport['onmessage']

  /** `onResponse` sees (and may amend) every response before the SDK does. */
  constructor (inner: Transport, calls: CallRegistry, delayResponses: boolean, onResponse?: (response: JsonObject) => void) {
    this.#inner = inner
    this.#calls = calls
    inner.onclose = () => this.onclose?.()
    inner.onerror = (error) => this.onerror?.(error)
    inner.onmessage = (message, extra) => {
      const shape = message as MessageShape
      if (isResponse(shape)) {
        this.#calls.screen(message as unknown as JsonObject)
        shieldErrorData(message as unknown as JsonObject)
        onResponse?.(message as unknown as JsonObject)
        const hand = (): void => {
          this.onmessage?.(message)
          this.#calls.answered(shape.id!)
        }
        if (delayResponses) setImmediate(hand)
        else hand()
        return
      }
      const via = (extra as ArrivalInfo | undefined)?.viaRequest
      if (via !== undefined) this.#calls.tagArrival(shape, via)
      this.onmessage?.(message)
    }
  }

  get hasPerRequestStream (): boolean | undefined {
    return this.#inner.hasPerRequestStream
  }

  get sessionId (): string | undefined {
    return this.#inner.sessionId
  }

  start (): Promise<void> {
    return this.#inner.start()
  }

  send (message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const shape = message as MessageShape
    // The SDK cancels a request whose call was aborted; a call handed over to another process goes on upstream.
    if (shape.method === 'notifications/cancelled' && this.#calls.handedOver((shape.params as { requestId?: RequestId } | undefined)?.requestId ?? '')) return Promise.resolve()
    if (shape.id === undefined || shape.method === undefined || options?.headers === undefined) return this.#inner.send(message, options)
    return this.#inner.send(message, { ...options, headers: this.#calls.sent(shape.id, options.headers) })
  }

  close (): Promise<void> {
    return this.#inner.close()
  }

  setProtocolVersion (version: string): void {
    this.#inner.setProtocolVersion?.(version)
  }
}
