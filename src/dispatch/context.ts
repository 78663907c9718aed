import type { Caller } from '../auth/access.ts'
import type { Logger } from '../observability/logger.ts'
import type { RequestTrace } from '../observability/request-trace.ts'
import type { JsonObject, RequestId, RpcMessage } from '../wire/jsonrpc.ts'
import type { SessionRecord } from '../store/types.ts'
import type { ClientRef } from '../upstream/client-ref.ts'

/** Everything a method handler may know about the request it serves, independent of the wire era. */
export interface RequestContext {
  readonly session: SessionRecord
  /** The client whose upstream sessions serve this request. */
  readonly client: ClientRef
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
  /** Sends a server→client request related to this request and waits for the client's answer. */
  request (method: string, params: JsonObject, signal: AbortSignal): Promise<JsonObject>
  /** The request's server span (tracing on); upstream requests made for it are its children. */
  readonly trace?: RequestTrace | undefined
}

export type Handler = (params: JsonObject, ctx: RequestContext) => Promise<JsonObject>

export type MethodTable = ReadonlyMap<string, Handler>
