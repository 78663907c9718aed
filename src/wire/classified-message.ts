import { GatewayError } from '../errors.ts'
import { classifyMessage, isObject, type InboundMessage, type RequestId, type RpcNotification, type RpcRequest, type RpcResponse } from './jsonrpc.ts'
import { MODERN_PROTOCOL_VERSIONS, PROTOCOL_VERSION_KEY, type Revision } from './versions.ts'

/**
 * What the MCP route knows of a POSTed message once it has read it: the one reading of the body that the rate
 * limiter, the metrics, tracing and the endpoints share, so that none of them looks at the raw body again and
 * none can read it differently from another.
 */

/** The revision a message speaks: 2026-07-28 (a per-request envelope), or 2025-11-25 (and the revisions before it). */
export type MessageEra = Revision

/** A JSON-RPC request: something runs and answers it. */
export interface ClassifiedRequest {
  readonly kind: 'request'
  readonly era: MessageEra
  readonly id: RequestId
  readonly method: string
  readonly message: RpcRequest
  /**
   * A task operation, as the task rate limits count them: every `tasks/*` request, and a `tools/call` asking
   * for a task (`params.task`, the 2025-11-25 dialect). A 2026-07-28 `tools/call` is none: whether it becomes
   * a task is the gateway's decision, made later (tasks.decide).
   */
  readonly taskOperation: boolean
  /** `params.taskId` of a task operation, when it is a string. */
  readonly taskId: string | undefined
}

export interface ClassifiedNotification {
  readonly kind: 'notification'
  readonly era: MessageEra
  readonly method: string
  readonly message: RpcNotification
}

/** A response the client posts: its answer to a request the gateway sent it. */
export interface ClassifiedResponse {
  readonly kind: 'response'
  readonly era: MessageEra
  readonly id: RequestId | null
  readonly message: RpcResponse
}

/**
 * A body that is no JSON-RPC message the gateway takes (a batch among them). It is refused with `error` where
 * an endpoint would have read it, after the limits, authentication and the header checks, as any request is.
 */
export interface InvalidMessage {
  readonly kind: 'invalid'
  readonly era: MessageEra
  /** The id of what looks like a request (a string `method` and a string or integer `id`), so its refusal answers it; else null. */
  readonly id: RequestId | null
  readonly error: GatewayError
}

export type ClassifiedMessage = ClassifiedRequest | ClassifiedNotification | ClassifiedResponse | InvalidMessage
/** A message an endpoint answers: the route refuses the invalid ones itself. */
export type ValidMessage = Exclude<ClassifiedMessage, InvalidMessage>

const MODERN_VERSIONS: readonly string[] = MODERN_PROTOCOL_VERSIONS

/**
 * The revision of a POSTed body: 2026-07-28 when its params carry a protocol-version claim in `_meta`, or when the
 * MCP-Protocol-Version header names a 2026-07-28 revision (a modern request missing its envelope, which the
 * 2026-07-28 endpoint refuses as such). Everything else is 2025-11-25, whose endpoint checks its own header.
 */
function eraOf (body: unknown, versionHeader: string | string[] | undefined): MessageEra {
  if (isObject(body) && isObject(body.params) && isObject(body.params._meta) && PROTOCOL_VERSION_KEY in body.params._meta) return '2026-07-28'
  return typeof versionHeader === 'string' && MODERN_VERSIONS.includes(versionHeader) ? '2026-07-28' : '2025-11-25'
}

/** The id an error answering `body` carries: that of anything shaped like a request, even one refused as invalid. */
function readableId (body: unknown): RequestId | null {
  if (!isObject(body)) return null
  const { method, id } = body
  return typeof method === 'string' && (typeof id === 'string' || Number.isInteger(id)) ? id as RequestId : null
}

function classifiedRequest (message: RpcRequest, era: MessageEra): ClassifiedRequest {
  const { method, params } = message
  const taskOperation = method.startsWith('tasks/') || (method === 'tools/call' && isObject(params?.task))
  const taskId = taskOperation && typeof params?.taskId === 'string' ? params.taskId : undefined
  return Object.freeze({ kind: 'request', era, id: message.id, method, message, taskOperation, taskId })
}

/**
 * Classifies the parsed JSON body of a POST and the MCP-Protocol-Version header that came with it. A body that
 * is no acceptable message is classified `invalid`, with the error its refusal carries, rather than thrown:
 * the route refuses it only after the checks that come first (limits, authentication, media types).
 */
export function classifyPost (body: unknown, versionHeader: string | string[] | undefined): ClassifiedMessage {
  const era = eraOf(body, versionHeader)
  let inbound: InboundMessage
  try {
    inbound = classifyMessage(body)
  } catch (err) {
    if (!(err instanceof GatewayError)) throw err
    return Object.freeze({ kind: 'invalid', era, id: readableId(body), error: err })
  }
  switch (inbound.kind) {
    case 'request':
      return classifiedRequest(inbound.message, era)
    case 'notification':
      return Object.freeze({ kind: 'notification', era, method: inbound.message.method, message: inbound.message })
    case 'response':
      return Object.freeze({ kind: 'response', era, id: inbound.message.id, message: inbound.message })
  }
}

/** The id an error ending the exchange of `message` answers: a request's, or one readable in an invalid body; else null. */
export function answeredId (message: ClassifiedMessage | undefined): RequestId | null {
  if (message?.kind === 'request') return message.id
  return message?.kind === 'invalid' ? message.id : null
}
