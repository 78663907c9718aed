import { GatewayError } from '../errors.ts'
import type { JsonObject } from './jsonrpc.ts'

/** Reads a required string field of `params`; a missing or mistyped field is -32602 naming it. */
export function requireString (params: JsonObject, field: string): string {
  const value = params[field]
  if (typeof value !== 'string' || value === '') {
    throw new GatewayError('GW_ERR_RPC_INVALID_PARAMS', [`'${field}' must be a non-empty string`])
  }
  return value
}

export function optionalObject (params: JsonObject, field: string): JsonObject | undefined {
  const value = params[field]
  if (value === undefined) return undefined
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new GatewayError('GW_ERR_RPC_INVALID_PARAMS', [`'${field}' must be an object`])
  }
  return value as JsonObject
}

export function requireObject (params: JsonObject, field: string): JsonObject {
  const value = optionalObject(params, field)
  if (value === undefined) throw new GatewayError('GW_ERR_RPC_INVALID_PARAMS', [`'${field}' is required and must be an object`])
  return value
}

export function optionalString (params: JsonObject, field: string): string | undefined {
  const value = params[field]
  if (value === undefined) return undefined
  if (typeof value !== 'string') throw new GatewayError('GW_ERR_RPC_INVALID_PARAMS', [`'${field}' must be a string`])
  return value
}

/** Copies params without the client's `_meta.progressToken`: the upstream call gets a token of its own. */
export function withoutProgressToken (params: JsonObject): JsonObject {
  const meta = params._meta
  if (meta === null || typeof meta !== 'object' || !('progressToken' in meta)) return params
  const { progressToken: _dropped, ...rest } = meta as JsonObject
  const copy: JsonObject = { ...params }
  if (Object.keys(rest).length > 0) copy._meta = rest
  else delete copy._meta
  return copy
}
