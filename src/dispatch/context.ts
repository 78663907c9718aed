import type { Caller } from '../auth/access.ts'
import type { CallOrigin } from '../calls/call-engine.ts'
import { GatewayError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import type { RequestTrace } from '../observability/request-trace.ts'
import type { JsonObject, RequestId, RpcMessage } from '../wire/jsonrpc.ts'
import type { ClientRef } from '../upstream/client-ref.ts'

/** Sends a server→client request and waits for the client's answer. */
export type ClientRequest = (method: string, params: JsonObject, signal: AbortSignal) => Promise<JsonObject>

/**
 * Everything a method handler may know about the request it serves, in either wire era. A 2025-era request
 * belongs to a session; a 2026-07-28 request stands alone and names its client in its own envelope.
 */
export interface RequestContext {
  /** The client whose upstream sessions serve this request; `client.principal` is who it acts for. */
  readonly client: ClientRef
  /** Every capability the client declared (its session's, or the request envelope's). */
  readonly clientCapabilities: JsonObject
  /** The 2025-era session the request belongs to; undefined in the 2026-07-28 era, which has no sessions. */
  readonly sessionId: string | undefined
  /** Who sent this request: what it may use, and its Authorization header where it is forwarded. */
  readonly caller: Caller
  readonly requestId: RequestId
  /** Aborted when the client cancels the request or the gateway shuts down. */
  readonly signal: AbortSignal
  readonly progressToken: RequestId | undefined
  readonly log: Logger
  /** Aborted when the client's connection for this request goes away (not a cancellation). */
  readonly disconnected: AbortSignal
  /** Answers over SSE from now on, even before anything is sent (for long waits such as tasks/result). */
  openStream (): void
  /** Sends any message to the client on this request's stream (switching the response to SSE). */
  send (message: RpcMessage): void
  /** Sends a notification related to this request to the client. */
  notify (method: string, params: JsonObject): void
  /**
   * Sends a server→client request related to this request. Absent where the era has none (2026-07-28:
   * input reaches the client as `input_required` rounds or through a task instead).
   */
  readonly request?: ClientRequest | undefined
  /** The request's server span (tracing on); upstream requests made for it are its children. */
  readonly trace?: RequestTrace | undefined
}

export type Handler = (params: JsonObject, ctx: RequestContext) => Promise<JsonObject>

export type MethodTable = ReadonlyMap<string, Handler>

/** The request's session; a request without one (2026-07-28) is refused for `method`, which needs one. */
export function sessionOf (ctx: RequestContext, method: string): string {
  if (ctx.sessionId === undefined) throw new GatewayError('GW_ERR_SESSION_REQUIRED', [method])
  return ctx.sessionId
}

/** The request's way of asking its client something during a call; only 2025-era requests have one. */
export function liveRequest (ctx: RequestContext): ClientRequest {
  if (ctx.request === undefined) throw new GatewayError('GW_ERR_INTERNAL', ['this request cannot carry server-to-client requests'])
  return ctx.request
}

/**
 * A call made for this request: on its client's upstream session, stopped with the request (or by `signal`),
 * with progress sent under the client's own token and notifications on the request's stream. `ask` is how
 * the upstream's input requests reach the client, which depends on the era.
 */
export function requestOrigin (ctx: RequestContext, ask: CallOrigin['ask'], signal: AbortSignal = ctx.signal): CallOrigin {
  const progressToken = ctx.progressToken
  return {
    client: ctx.client,
    capabilities: ctx.clientCapabilities,
    signal,
    ask,
    ...(progressToken !== undefined && {
      progress: (progress: JsonObject) => ctx.notify('notifications/progress', { ...progress, progressToken }),
    }),
    // The status of a task the upstream runs the call as is not the client's (upstreamTaskStatus is left out): it
    // asked for no task and never saw that task's id.
    notify: (method, params) => { ctx.notify(method, params) },
    authorization: ctx.caller.authorization,
    trace: ctx.trace,
  }
}
