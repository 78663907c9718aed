import { createHash, createHmac, randomBytes } from 'node:crypto'
import type { ClientCapabilities } from '@modelcontextprotocol/client'
import type { JsonObject } from '../wire/jsonrpc.ts'
import type { InputMethod } from './call-attribution.ts'

/**
 * The downstream client an upstream session serves. Everything one client asks of one upstream goes over
 * one upstream session, so a server that keeps state sees one consistent client, as if the client had
 * started it itself.
 */
export interface ClientRef {
  /**
   * Names the client: `session:<id>` for a 2025-era session; `principal:<principal>:<capabilities>` for
   * 2026-07-28 requests, which carry no session (with auth off their principal is `anonymous`, so all such
   * clients that declare the same capabilities are one client).
   */
  readonly key: string
  /** Who the client acts for. */
  readonly principal: string
  /** The capabilities the client declared that an upstream session mirrors (elicitation, sampling, roots, client-side tasks). */
  readonly capabilities: ClientCapabilities
  /** `capabilities` in a canonical form: two clients with the same signature see the same lists. */
  readonly signature: string
}

const MIRRORED = ['elicitation', 'sampling', 'roots'] as const

function isObject (value: unknown): value is JsonObject {
  return value !== undefined && value !== null && typeof value === 'object' && !Array.isArray(value)
}

/**
 * The part of a client's `tasks` capability (2025-11-25) the gateway honours toward an upstream: listing and
 * cancelling, and sampling and elicitation requests run as tasks (see client-side-tasks.ts). Undefined when
 * none of it was declared. What the gateway cannot honour is not declared: the server would rely on it.
 */
function mirroredTasks (declared: unknown): JsonObject | undefined {
  if (!isObject(declared)) return undefined
  const tasks: JsonObject = {}
  if (isObject(declared.list)) tasks.list = declared.list
  if (isObject(declared.cancel)) tasks.cancel = declared.cancel
  const asked = isObject(declared.requests) ? declared.requests : {}
  const requests: JsonObject = {}
  const { sampling, elicitation } = asked
  if (isObject(sampling) && isObject(sampling.createMessage)) requests.sampling = { createMessage: sampling.createMessage }
  if (isObject(elicitation) && isObject(elicitation.create)) requests.elicitation = { create: elicitation.create }
  if (Object.keys(requests).length > 0) tasks.requests = requests
  return Object.keys(tasks).length > 0 ? tasks : undefined
}

/**
 * The client capabilities an upstream session declares: exactly those the downstream client has that the
 * gateway can stand behind (elicitation, sampling, roots, and the client-side part of `tasks`). Extensions
 * (the 2026-07-28 tasks extension among them) are the gateway's to declare per request, never mirrored.
 */
export function mirrorCapabilities (downstream: JsonObject | undefined): ClientCapabilities {
  const mirrored: JsonObject = {}
  for (const key of MIRRORED) {
    const value = downstream?.[key]
    if (isObject(value)) mirrored[key] = value
  }
  const tasks = mirroredTasks(downstream?.tasks)
  if (tasks !== undefined) mirrored.tasks = tasks
  return mirrored as ClientCapabilities
}

/** JSON with object keys sorted at every level, so equal values always give equal text. */
function canonical (value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as JsonObject).filter(([, v]) => v !== undefined).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`
  }
  return JSON.stringify(value)
}

export function capabilitySignature (capabilities: ClientCapabilities): string {
  return canonical(capabilities)
}

function short (text: string): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, 16)
}

/** Keys naming credentials are this process's own: a tag cannot be matched against guesses elsewhere. */
const TAG_KEY = randomBytes(32)

/**
 * What names a forwarded credential in keys: a keyed hash, never the credential itself; `-` for none.
 * Sessions opened with a caller's own Authorization header are found by it, so that they serve that caller only.
 */
export function credentialTag (authorization: string | undefined): string {
  return authorization === undefined ? '-' : createHmac('sha256', TAG_KEY).update(authorization).digest('base64url').slice(0, 22)
}

/**
 * Clients known at once, of each kind: every request names its client, which is worked out once per client.
 * Sessions are found by their id and 2026-07-28 clients by their principal's capabilities as sent, so that
 * a request builds no key to find its client.
 */
const KNOWN_LIMIT = 10_000
const sessionClients = new Map<string, ClientRef>()
const principalClients = new Map<string, ClientRef>()

function remember (known: Map<string, ClientRef>, key: string, client: ClientRef): ClientRef {
  if (known.size >= KNOWN_LIMIT) known.delete(known.keys().next().value!)
  known.set(key, client)
  return client
}

const SESSION_PREFIX = 'session:'

/** The key of the client that a 2025-era session is. */
export function sessionClientKey (sessionId: string): string {
  return `${SESSION_PREFIX}${sessionId}`
}

/** The client of a 2025-era session (whose principal and capabilities never change). */
export function sessionClient (sessionId: string, principal: string, clientCapabilities: JsonObject): ClientRef {
  const known = sessionClients.get(sessionId)
  if (known !== undefined) return known
  const capabilities = mirrorCapabilities(clientCapabilities)
  const client = { key: sessionClientKey(sessionId), principal, capabilities, signature: capabilitySignature(capabilities) }
  return remember(sessionClients, sessionId, client)
}

/** The client of 2026-07-28 requests: the principal, with the capabilities the request declares. */
export function principalClient (principal: string, clientCapabilities: JsonObject): ClientRef {
  const key = `${principal}\u0000${JSON.stringify(clientCapabilities)}`
  const known = principalClients.get(key)
  if (known !== undefined) return known
  const capabilities = mirrorCapabilities(clientCapabilities)
  const signature = capabilitySignature(capabilities)
  return remember(principalClients, key, { key: `principal:${principal}:${short(signature)}`, principal, capabilities, signature })
}

/** The client a task was created for: its session, or (2026-07-28) its principal and capabilities. */
export function taskClient (task: { sessionId: string | null, principal: string, clientCapabilities: JsonObject }): ClientRef {
  return task.sessionId === null
    ? principalClient(task.principal, task.clientCapabilities)
    : sessionClient(task.sessionId, task.principal, task.clientCapabilities)
}

/** The 2025-era session id in a client key, if the client is a session. */
export function sessionIdOf (clientKey: string): string | undefined {
  return clientKey.startsWith(SESSION_PREFIX) ? clientKey.slice(SESSION_PREFIX.length) : undefined
}

/** The client capability an input request needs when the client did not declare it; undefined when it did. */
export function clientSupports (capabilities: JsonObject, method: InputMethod, params: JsonObject): string | undefined {
  if (method === 'sampling/createMessage') return capabilities.sampling ? undefined : 'sampling'
  if (method === 'roots/list') return capabilities.roots ? undefined : 'roots'
  const elicitation = capabilities.elicitation as JsonObject | undefined
  if (!elicitation) return 'elicitation'
  const mode = params.mode === 'url' ? 'url' : 'form'
  // An empty elicitation capability means form mode only (2025-06-18 clients).
  const declared = Object.keys(elicitation).length === 0 ? ['form'] : Object.keys(elicitation)
  return declared.includes(mode) ? undefined : `elicitation.${mode}`
}

/** The key of the gateway's own session of an upstream (health, lists every client starts from). */
export const GATEWAY_KEY = 'gateway'

/** The client the gateway's own session serves: no principal, no capabilities. */
export const GATEWAY_CLIENT: ClientRef = { key: GATEWAY_KEY, principal: '', capabilities: {}, signature: '{}' }
