import { GatewayError } from '../../errors.ts'
import type { JsonObject } from '../jsonrpc.ts'

/** The reserved `_meta` keys of the 2026-07-28 per-request envelope. */
export const PROTOCOL_VERSION_KEY = 'io.modelcontextprotocol/protocolVersion'
export const CLIENT_CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities'
export const CLIENT_INFO_KEY = 'io.modelcontextprotocol/clientInfo'
export const SERVER_INFO_KEY = 'io.modelcontextprotocol/serverInfo'
export const SUBSCRIPTION_ID_KEY = 'io.modelcontextprotocol/subscriptionId'
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks'

export const MODERN_PROTOCOL_VERSIONS = ['2026-07-28'] as const

/** What one modern request says about its sender; never carried over to another request. */
export interface Envelope {
  protocolVersion: string
  clientCapabilities: JsonObject
  clientInfo: JsonObject | undefined
}

function isObject (value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

/** A message belongs to the modern era when its params carry a protocol-version claim. */
export function isModernMessage (body: unknown): boolean {
  if (!isObject(body) || !isObject(body.params)) return false
  const meta = body.params._meta
  return isObject(meta) && PROTOCOL_VERSION_KEY in meta
}

export function readEnvelope (params: JsonObject | undefined): Envelope {
  const meta = isObject(params?._meta) ? params._meta : {}
  const protocolVersion = meta[PROTOCOL_VERSION_KEY]
  if (typeof protocolVersion !== 'string' || !(MODERN_PROTOCOL_VERSIONS as readonly string[]).includes(protocolVersion)) {
    throw new GatewayError('GW_ERR_MODERN_VERSION_UNSUPPORTED', [String(protocolVersion)], {
      data: { supported: [...MODERN_PROTOCOL_VERSIONS], requested: protocolVersion ?? null },
    })
  }
  const capabilities = meta[CLIENT_CAPABILITIES_KEY]
  if (!isObject(capabilities)) {
    throw new GatewayError('GW_ERR_RPC_INVALID_PARAMS', [`'_meta["${CLIENT_CAPABILITIES_KEY}"]' is required on every request and must be an object`])
  }
  const clientInfo = meta[CLIENT_INFO_KEY]
  return { protocolVersion, clientCapabilities: capabilities, clientInfo: isObject(clientInfo) ? clientInfo : undefined }
}

export function declaresTasks (capabilities: JsonObject): boolean {
  const extensions = capabilities.extensions
  return isObject(extensions) && isObject(extensions[TASKS_EXTENSION])
}

export function tasksCapabilityRequired (): GatewayError {
  return new GatewayError('GW_ERR_CAPABILITY_REQUIRED', [`the ${TASKS_EXTENSION} extension`], {
    data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
  })
}

const ENVELOPE_KEYS = new Set([PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, 'io.modelcontextprotocol/logLevel'])

/** The params without the envelope: what an upstream of either era may see of the client's `_meta`. */
export function withoutEnvelope (params: JsonObject): JsonObject {
  const meta = params._meta
  if (!isObject(meta)) return params
  const rest = Object.fromEntries(Object.entries(meta).filter(([key]) => !ENVELOPE_KEYS.has(key)))
  const copy: JsonObject = { ...params }
  if (Object.keys(rest).length > 0) copy._meta = rest
  else delete copy._meta
  return copy
}
