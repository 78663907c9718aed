import { GatewayError, RpcError } from '../../errors.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'
import { CLIENT_CAPABILITIES_KEY, MODERN_PROTOCOL_VERSIONS, PROTOCOL_VERSION_KEY, TASKS_EXTENSION } from '../../wire/versions.ts'

/** The reserved `_meta` keys of the 2026-07-28 per-request envelope. */
export const CLIENT_INFO_KEY = 'io.modelcontextprotocol/clientInfo'
export const SERVER_INFO_KEY = 'io.modelcontextprotocol/serverInfo'
export const SUBSCRIPTION_ID_KEY = 'io.modelcontextprotocol/subscriptionId'
export { CLIENT_CAPABILITIES_KEY, MODERN_PROTOCOL_VERSIONS, PROTOCOL_VERSION_KEY, TASKS_EXTENSION }

/** What one modern request says about its sender; never carried over to another request. */
export interface Envelope {
  protocolVersion: string
  clientCapabilities: JsonObject
  clientInfo: JsonObject | undefined
}

function isObject (value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

export function readEnvelope (params: JsonObject | undefined, headerVersion: string | undefined): Envelope {
  if (!isObject(params?._meta)) {
    throw new GatewayError('GW_ERR_ENVELOPE_MISSING', [`params._meta with "${PROTOCOL_VERSION_KEY}" and "${CLIENT_CAPABILITIES_KEY}"`])
  }
  const meta = params._meta
  const protocolVersion = meta[PROTOCOL_VERSION_KEY]
  if (typeof protocolVersion !== 'string') throw new GatewayError('GW_ERR_ENVELOPE_MISSING', [`'_meta["${PROTOCOL_VERSION_KEY}"]'`])
  if (headerVersion !== protocolVersion) {
    const description = headerVersion === undefined
      ? `the body envelope names protocol version ${protocolVersion} but the required MCP-Protocol-Version header is absent`
      : `MCP-Protocol-Version is '${headerVersion}' but the body envelope names protocol version ${protocolVersion}`
    throw new GatewayError('GW_ERR_HEADER_MISMATCH', [description], { data: { mismatch: { header: headerVersion ?? '(missing)', body: protocolVersion } } })
  }
  if (!(MODERN_PROTOCOL_VERSIONS as readonly string[]).includes(protocolVersion)) {
    throw new GatewayError('GW_ERR_MODERN_VERSION_UNSUPPORTED', [String(protocolVersion)], {
      data: { supported: [...MODERN_PROTOCOL_VERSIONS], requested: protocolVersion ?? null },
    })
  }
  const capabilities = meta[CLIENT_CAPABILITIES_KEY]
  if (!isObject(capabilities)) throw new GatewayError('GW_ERR_ENVELOPE_MISSING', [`'_meta["${CLIENT_CAPABILITIES_KEY}"]' (an object)`])
  const clientInfo = meta[CLIENT_INFO_KEY]
  return { protocolVersion, clientCapabilities: capabilities, clientInfo: isObject(clientInfo) ? clientInfo : undefined }
}

export function declaresTasks (capabilities: JsonObject): boolean {
  const extensions = capabilities.extensions
  return isObject(extensions) && isObject(extensions[TASKS_EXTENSION])
}

/** Missing Required Client Capability: HTTP 400 wherever it arises, the spec says (S26 MissingRequiredClientCapabilityError). */
const MISSING_CAPABILITY = -32021

/**
 * The HTTP status a JSON-RPC error gets on the 2026-07-28 wire while the response is not yet streaming:
 * the gateway's own 400-class errors and `-32021`, also when relayed from an upstream (the gateway
 * declares exactly its client's capabilities upstream, so the capability is the client's to add), get
 * 400; every other error, relayed ones included, is in-band with 200 (a relayed `-32020` or `-32022` is
 * about the gateway's own request upstream, not about the client's, so it stays in-band as in the SDK).
 */
export function modernErrorStatus (err: unknown): 200 | 400 {
  if (err instanceof GatewayError) return err.statusCode === 400 ? 400 : 200
  return err instanceof RpcError && err.rpcCode === MISSING_CAPABILITY ? 400 : 200
}

/** -32021 for a client capability such as `sampling` or `elicitation.url`. */
export function capabilityRequired (capability: string): GatewayError {
  const [name, mode] = capability.split('.') as [string, string | undefined]
  return new GatewayError('GW_ERR_CAPABILITY_REQUIRED', [capability], {
    data: { requiredCapabilities: { [name]: mode === undefined ? {} : { [mode]: {} } } },
  })
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
  // Copied key by key: a spread followed by `delete` would leave the copy slow to read.
  let rest: JsonObject | undefined
  for (const key in meta) {
    if (ENVELOPE_KEYS.has(key)) continue
    rest ??= {}
    rest[key] = meta[key]!
  }
  const copy: JsonObject = {}
  for (const key in params) if (key !== '_meta') copy[key] = params[key]!
  if (rest !== undefined) copy._meta = rest
  return copy
}
