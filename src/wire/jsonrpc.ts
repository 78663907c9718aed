import { GatewayError, type WireError } from '../errors.ts'

/** JSON-RPC 2.0 message shapes as the gateway sees them on the wire. */

export type RequestId = string | number
export type JsonObject = Record<string, unknown>

export interface RpcRequest {
  jsonrpc: '2.0'
  id: RequestId
  method: string
  params?: JsonObject
}

export interface RpcNotification {
  jsonrpc: '2.0'
  method: string
  params?: JsonObject
}

export interface RpcResult {
  jsonrpc: '2.0'
  id: RequestId
  result: JsonObject
}

/** A JSON-RPC response that answers request `id` (null: the request could not be read) with an error. */
export interface RpcErrorResponse {
  jsonrpc: '2.0'
  id: string | number | null
  error: WireError
}

export type RpcResponse = RpcResult | RpcErrorResponse
export type RpcMessage = RpcRequest | RpcNotification | RpcResponse

export type InboundMessage =
  | { kind: 'request', message: RpcRequest }
  | { kind: 'notification', message: RpcNotification }
  | { kind: 'response', message: RpcResponse }

function isObject (value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

function isId (value: unknown): value is RequestId {
  return typeof value === 'string' || (typeof value === 'number' && Number.isInteger(value))
}

/** Deepest nesting of objects and arrays a message may have; deeper ones are refused before anything re-serializes them. */
export const MAX_NESTING = 100

/**
 * Whether objects and arrays nest deeper than `limit`. It recurses `limit` + 1 levels at most, so a hostile depth
 * cannot overflow the stack, and allocates nothing: it runs on every message.
 */
function nestedDeeperThan (value: unknown, limit: number): boolean {
  if (limit < 0) return true
  if (Array.isArray(value)) {
    for (const child of value) {
      if (child !== null && typeof child === 'object' && nestedDeeperThan(child, limit - 1)) return true
    }
    return false
  }
  const object = value as Record<string, unknown>
  for (const key in object) {
    const child = object[key]
    if (child !== null && typeof child === 'object' && nestedDeeperThan(child, limit - 1)) return true
  }
  return false
}

/** Classifies one parsed JSON value as a JSON-RPC message, or throws GW_ERR_HTTP_INVALID_MESSAGE saying what is wrong. */
export function classifyMessage (body: unknown): InboundMessage {
  if (Array.isArray(body)) throw new GatewayError('GW_ERR_HTTP_BATCH_UNSUPPORTED')
  if (!isObject(body)) throw new GatewayError('GW_ERR_HTTP_INVALID_MESSAGE', ['the body must be a JSON-RPC 2.0 object'])
  if (nestedDeeperThan(body, MAX_NESTING)) throw new GatewayError('GW_ERR_HTTP_INVALID_MESSAGE', [`objects and arrays nest more than ${MAX_NESTING} levels deep`])
  if (body.jsonrpc !== '2.0') throw new GatewayError('GW_ERR_HTTP_INVALID_MESSAGE', ['"jsonrpc" must be "2.0"'])
  if ('params' in body && body.params !== undefined && !isObject(body.params)) {
    throw new GatewayError('GW_ERR_HTTP_INVALID_MESSAGE', ['"params" must be an object'])
  }
  if (typeof body.method === 'string') {
    if (!('id' in body)) return { kind: 'notification', message: body as unknown as RpcNotification }
    if (!isId(body.id)) throw new GatewayError('GW_ERR_HTTP_INVALID_MESSAGE', ['"id" must be a string or an integer'])
    return { kind: 'request', message: body as unknown as RpcRequest }
  }
  if ('method' in body) throw new GatewayError('GW_ERR_HTTP_INVALID_MESSAGE', ['"method" must be a string'])
  if (('result' in body) !== ('error' in body) && (isId(body.id) || body.id === null)) {
    if ('result' in body && !isObject(body.result)) throw new GatewayError('GW_ERR_HTTP_INVALID_MESSAGE', ['"result" must be an object'])
    if ('error' in body && !(isObject(body.error) && Number.isInteger(body.error.code) && typeof body.error.message === 'string')) {
      throw new GatewayError('GW_ERR_HTTP_INVALID_MESSAGE', ['"error" must be an object with an integer "code" and a string "message"'])
    }
    return { kind: 'response', message: body as unknown as RpcResponse }
  }
  throw new GatewayError('GW_ERR_HTTP_INVALID_MESSAGE', ['a message needs "method" (request or notification) or exactly one of "result" and "error" (response)'])
}

export function resultMessage (id: RequestId, result: JsonObject): RpcResult {
  return { jsonrpc: '2.0', id, result }
}

/** Reads `params._meta.progressToken` if the client supplied one. */
export function progressTokenOf (params: JsonObject | undefined): RequestId | undefined {
  const meta = params?._meta
  if (!isObject(meta)) return undefined
  const token = meta.progressToken
  return isId(token) ? token : undefined
}

export { isObject }
