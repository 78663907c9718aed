import { GatewayError } from '../../errors.ts'
import type { SessionRecord } from '../../store/types.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'
import { GATEWAY_INFO, negotiateVersion } from '../../wire/versions.ts'

const TASKS_PROTOCOL_VERSION = '2025-11-25'

/** What the gateway offers to every legacy client, whatever its upstreams are. */
export const SERVER_CAPABILITIES = {
  tools: { listChanged: true },
  prompts: { listChanged: true },
  resources: { subscribe: true, listChanged: true },
  completions: {},
  logging: {},
  tasks: {
    list: {},
    cancel: {},
    requests: { tools: { call: {} } },
  },
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

/** The new session and the InitializeResult for it. */
export function initializeResult (
  params: JsonObject,
  sessionId: string,
  now: number,
  principal: string | undefined,
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
  const { tasks, ...withoutTasks } = SERVER_CAPABILITIES
  const result: JsonObject = {
    protocolVersion,
    // Tasks exist in the 2025-11-25 revision only.
    capabilities: protocolVersion === TASKS_PROTOCOL_VERSION ? { ...withoutTasks, tasks } : withoutTasks,
    serverInfo: GATEWAY_INFO,
  }
  return { result, session }
}
