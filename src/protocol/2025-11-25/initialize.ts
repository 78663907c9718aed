import type { ServerProfile } from '../../catalog/server-profile.ts'
import { GatewayError } from '../../errors.ts'
import type { SessionRecord } from '../../store/types.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'
import { GATEWAY_INFO, negotiateVersion } from '../../wire/versions.ts'

const TASKS_PROTOCOL_VERSION = '2025-11-25'

/** What the gateway itself offers every 2025-11-25 client, whatever its upstreams are: tasks of tool calls. */
export const TASKS_CAPABILITY = {
  list: {},
  cancel: {},
  requests: { tools: { call: {} } },
} as const

function isObject (value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

export function validateInitialize (params: JsonObject): void {
  if (typeof params.protocolVersion !== 'string') {
    throw new GatewayError('GW_ERR_RPC_INVALID_PARAMS', ["'protocolVersion' must be a string such as '2025-11-25'"])
  }
  if (params.capabilities !== undefined && !isObject(params.capabilities)) {
    throw new GatewayError('GW_ERR_RPC_INVALID_PARAMS', ["'capabilities' must be an object"])
  }
  if (!isObject(params.clientInfo) || typeof params.clientInfo.name !== 'string') {
    throw new GatewayError('GW_ERR_RPC_INVALID_PARAMS', ["'clientInfo' must be an object with a string 'name'"])
  }
}

/**
 * Refuses `capabilities` or `clientInfo` larger than `maxBytes` as JSON (limits.clientInfoBytes): the session
 * stores both for its whole life, and every upstream session opened for it declares the capabilities again.
 */
export function checkStoredSizes (params: JsonObject, maxBytes: number): void {
  for (const field of ['capabilities', 'clientInfo'] as const) {
    const value = params[field]
    if (value === undefined) continue
    const bytes = Buffer.byteLength(JSON.stringify(value))
    if (bytes > maxBytes) throw new GatewayError('GW_ERR_CLIENT_INFO_TOO_LARGE', [field, bytes, maxBytes])
  }
}

/**
 * The new session and the InitializeResult for it: the capabilities and instructions of `profile` (those of the
 * upstreams), with the gateway's own tasks.
 */
export function initializeResult (
  params: JsonObject,
  sessionId: string,
  now: number,
  principal: string | undefined,
  profile: ServerProfile,
): { result: JsonObject, session: SessionRecord } {
  const protocolVersion = negotiateVersion(params.protocolVersion)
  const session: SessionRecord = {
    id: sessionId,
    principal: principal ?? `anonymous:${sessionId}`,
    protocolVersion,
    clientCapabilities: isObject(params.capabilities) ? params.capabilities : {},
    clientInfo: params.clientInfo as JsonObject,
    createdAt: now,
    lastSeenAt: now,
  }
  // Tasks exist in the 2025-11-25 revision only.
  const tasks = protocolVersion === TASKS_PROTOCOL_VERSION ? { tasks: TASKS_CAPABILITY } : {}
  const result: JsonObject = {
    protocolVersion,
    capabilities: { ...profile.capabilities, ...tasks },
    serverInfo: GATEWAY_INFO,
    ...(profile.instructions !== undefined && { instructions: profile.instructions }),
  }
  return { result, session }
}
