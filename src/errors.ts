/**
 * Every error the gateway raises, in one table. A code is never reused for another meaning.
 *
 * `status` is the HTTP status used when the error ends the HTTP exchange itself (transport-level errors);
 * `rpc` is the JSON-RPC error code used when the error answers one JSON-RPC request inside an exchange.
 * Messages are templates: `%s` placeholders are filled from the arguments in order.
 */
export interface ErrorDef {
  readonly status: number
  readonly rpc: number
  readonly message: string
  /** Seconds a client should wait before trying again (sent as Retry-After), when the condition is known to pass. */
  readonly retryAfter?: number
}

export const ERRORS = {
  GW_ERR_CONFIG_INVALID: { status: 500, rpc: -32603, message: 'configuration is invalid:\n%s' },
  GW_ERR_CONFIG_READ: { status: 500, rpc: -32603, message: "cannot read configuration file '%s': %s" },
  GW_ERR_CATALOG_COLLISION: { status: 500, rpc: -32603, message: '%s' },

  GW_ERR_HTTP_PARSE: { status: 400, rpc: -32700, message: 'Parse error: the body is not valid JSON (%s)' },
  GW_ERR_HTTP_INVALID_MESSAGE: { status: 400, rpc: -32600, message: 'Invalid Request: %s' },
  GW_ERR_HTTP_BATCH_UNSUPPORTED: { status: 400, rpc: -32600, message: 'Invalid Request: JSON-RPC batches are not supported; send one message per POST' },
  GW_ERR_HTTP_BODY_TOO_LARGE: { status: 413, rpc: -32600, message: 'Request body exceeds the limit of %s bytes (server.maxBodyBytes)' },
  GW_ERR_HTTP_MEDIA_TYPE: { status: 415, rpc: -32600, message: 'Unsupported Media Type: POST bodies must be application/json' },
  GW_ERR_HTTP_NOT_ACCEPTABLE: { status: 406, rpc: -32600, message: 'Not Acceptable: the Accept header must list %s' },
  GW_ERR_HTTP_METHOD_NOT_ALLOWED: { status: 405, rpc: -32600, message: 'Method Not Allowed: %s' },
  GW_ERR_HTTP_HOST_FORBIDDEN: { status: 403, rpc: -32600, message: "Forbidden: Host '%s' is not in server.allowedHosts" },
  GW_ERR_HTTP_ORIGIN_FORBIDDEN: { status: 403, rpc: -32600, message: "Forbidden: Origin '%s' is not in server.allowedOrigins" },
  GW_ERR_HTTP_HOST_DUPLICATE: { status: 400, rpc: -32600, message: 'Bad Request: the request carries %s Host headers; send exactly one' },

  GW_ERR_SESSION_REQUIRED: { status: 400, rpc: -32600, message: 'Bad Request: the Mcp-Session-Id header is required for %s (send initialize first)' },
  GW_ERR_SESSION_NOT_FOUND: { status: 404, rpc: -32001, message: 'Session not found: it expired or was deleted; initialize a new session' },
  GW_ERR_PROTOCOL_VERSION_HEADER: { status: 400, rpc: -32600, message: "Bad Request: MCP-Protocol-Version '%s' %s" },

  GW_ERR_HEADER_MISMATCH: { status: 400, rpc: -32020, message: 'Bad Request: the request headers and body disagree: %s' },
  GW_ERR_CAPABILITY_REQUIRED: { status: 400, rpc: -32021, message: 'Missing required client capability: %s' },
  GW_ERR_ENVELOPE_MISSING: { status: 400, rpc: -32602, message: 'Invalid params: every 2026-07-28 request must carry %s' },
  GW_ERR_MODERN_METHOD_NOT_FOUND: { status: 404, rpc: -32601, message: 'Method not found: %s (not a method of the 2026-07-28 protocol)' },
  GW_ERR_MODERN_VERSION_UNSUPPORTED: { status: 400, rpc: -32022, message: 'Unsupported protocol version: %s' },
  GW_ERR_REQUEST_STATE_INVALID: { status: 200, rpc: -32602, message: 'Invalid params: requestState %s; send the original request again without requestState' },

  GW_ERR_RPC_METHOD_NOT_FOUND: { status: 200, rpc: -32601, message: 'Method not found: %s' },
  GW_ERR_RPC_INVALID_PARAMS: { status: 200, rpc: -32602, message: 'Invalid params: %s' },
  GW_ERR_TOOL_NOT_FOUND: { status: 200, rpc: -32602, message: "Unknown tool: '%s'" },
  GW_ERR_PROMPT_NOT_FOUND: { status: 200, rpc: -32602, message: "Unknown prompt: '%s'" },
  GW_ERR_RESOURCE_NOT_FOUND: { status: 200, rpc: -32002, message: "Resource not found: '%s'" },

  GW_ERR_UPSTREAM_UNAVAILABLE: { status: 503, rpc: -32050, message: "upstream '%s' is unavailable: %s" },
  GW_ERR_UPSTREAM_TIMEOUT: { status: 504, rpc: -32001, message: "upstream '%s' did not answer %s within %s" },
  GW_ERR_UPSTREAM_CONNECTION_LOST: { status: 502, rpc: -32051, message: "upstream '%s' connection was lost during %s: %s" },
  GW_ERR_UPSTREAM_FAILED: { status: 502, rpc: -32052, message: "upstream '%s' failed on %s: %s" },
  GW_ERR_UPSTREAM_OVERLOADED: { status: 503, rpc: -32061, message: "upstream '%s' refused %s for now (it answered HTTP %s: unavailable or overloaded); try again later" },
  GW_ERR_UPSTREAM_UNREACHABLE: { status: 503, rpc: -32062, message: "upstream '%s' cannot be reached for %s (%s); the request was not sent" },
  GW_ERR_UPSTREAM_BUSY: { status: 503, rpc: -32053, message: "upstream '%s' has %s calls waiting for a free call slot (upstreams[].maxQueuedCalls); try again later" },
  GW_ERR_UPSTREAM_SLOT_TIMEOUT: { status: 503, rpc: -32053, message: "upstream '%s' had no free call slot within %s (upstreams[].slotWaitTimeout): %s; try again later" },
  GW_ERR_UPSTREAM_SESSION_LIMIT: { status: 503, rpc: -32059, message: "upstream '%s' already has %s sessions open, all in use (upstreams[].maxSessions); try again when a call or task ends, or raise maxSessions, or use sessions: shared for a server that keeps no per-client state" },
  GW_ERR_UPSTREAM_SESSION_SHARE: { status: 503, rpc: -32059, message: "upstream '%s' already has %s sessions open for this principal, all in use (upstreams[].maxSessionsPerPrincipal); wait for a call or task to end, or end unused sessions with DELETE" },
  GW_ERR_UPSTREAM_RESPONSE_TOO_LARGE: { status: 502, rpc: -32063, message: "upstream '%s' answered %s with more than %s bytes (upstreams[].maxResponseBytes); the answer was not read to its end: ask the tool for less, or raise maxResponseBytes of this upstream" },
  GW_ERR_UPSTREAM_TOKEN_REFUSED: { status: 403, rpc: -32064, message: "the authorization server of upstream '%s' refused a token for it: %s" },
  GW_ERR_UPSTREAM_AUTH_SERVER_UNAVAILABLE: { status: 503, rpc: -32065, message: "the authorization server of upstream '%s' cannot give a token now: %s; try again in %s s" },
  GW_ERR_UPSTREAM_AUTH_DISCOVERY: { status: 502, rpc: -32066, message: "upstream '%s' does not say how to get a token for it: %s" },
  GW_ERR_UPSTREAM_SUBJECT_TOKEN_MISSING: { status: 403, rpc: -32067, message: "upstream '%s' takes a token exchanged for the caller's own access token, and this request has none: %s" },
  GW_ERR_UPSTREAM_NO_CREDENTIAL: { status: 403, rpc: -32068, message: "upstream '%s' has no credential for this principal (%s); ask the operator for a key of yours in upstreams[].credentials" },

  GW_ERR_CLIENT_UNREACHABLE: { status: 200, rpc: -32603, message: "the upstream sent '%s' while no call of its client was in flight, and %s" },
  GW_ERR_CLIENT_CAPABILITY_MISSING: { status: 200, rpc: -32601, message: "the downstream client did not declare the '%s' capability, so '%s' cannot be relayed to it" },
  GW_ERR_REQUEST_CANCELLED: { status: 200, rpc: -32800, message: 'request was cancelled by the client: %s' },

  GW_ERR_TASK_NOT_FOUND: { status: 200, rpc: -32602, message: "Invalid params: task '%s' not found (unknown, expired, or not yours)" },
  GW_ERR_TASK_TERMINAL: { status: 200, rpc: -32602, message: "Invalid params: task '%s' is already %s" },
  GW_ERR_TASK_LIMIT: { status: 200, rpc: -32054, message: 'too many active tasks: %s of %s allowed per principal (tasks.maxActivePerPrincipal); wait for some to finish' },
  GW_ERR_TASK_INPUT_LIMIT: { status: 200, rpc: -32055, message: "task '%s' already has %s unanswered input requests (tasks.maxQueuedInputs)" },
  GW_ERR_TASK_FORBIDDEN: { status: 200, rpc: -32601, message: "Method not found: tool '%s' cannot run as a task (taskSupport: forbidden)" },
  GW_ERR_TASK_REQUIRED: { status: 200, rpc: -32601, message: "Method not found: tool '%s' must be called as a task (taskSupport: required); add params.task" },
  GW_ERR_TASK_RESTARTED: { status: 200, rpc: -32603, message: 'gateway restarted during execution' },
  GW_ERR_TASK_OWNER_LOST: { status: 200, rpc: -32603, message: 'gateway process lost during execution' },
  GW_ERR_TASK_UNREACHABLE: { status: 200, rpc: -32603, message: 'gateway process %s during execution, and %s could not be reached again: %s' },
  GW_ERR_TASK_HANDED_OVER: { status: 200, rpc: -32603, message: 'this gateway process handed the task over to another (%s); the upstream task runs on' },
  GW_ERR_TASK_RESULT_TOO_LARGE: { status: 200, rpc: -32060, message: 'the upstream\'s result of %s bytes is over the %s bytes a task may store (tasks.maxResultBytes); ask the tool for less, or raise the limit' },
  GW_ERR_TASK_LOST_BY_STORE: { status: 200, rpc: -32071, message: "task '%s' was lost by the store: %s; its outcome is unknown, start it again if it is still needed" },
  GW_ERR_TASK_OUTCOME_NOT_STORED: { status: 200, rpc: -32072, message: 'the outcome could not be stored: %s' },
  GW_ERR_STORED_BYTES_LIMIT: { status: 200, rpc: -32070, message: 'this principal\'s tasks already store %s bytes, and %s more would pass the %s bytes one principal may store (limits.storedBytesPerPrincipal); wait for its finished tasks to expire, or ask for shorter task TTLs' },
  GW_ERR_CLIENT_INFO_TOO_LARGE: { status: 200, rpc: -32602, message: 'Invalid params: \'%s\' is %s bytes as JSON, over the %s bytes a session may store (limits.clientInfoBytes)' },
  GW_ERR_INPUT_EXPIRED: { status: 200, rpc: -32603, message: 'the upstream stopped waiting for the answer to %s' },

  GW_ERR_AUTH_MISSING: { status: 401, rpc: -32001, message: 'Unauthorized: send Authorization: Bearer <token>' },
  GW_ERR_AUTH_INVALID: { status: 401, rpc: -32001, message: 'Unauthorized: the bearer token is not valid' },
  GW_ERR_AUTH_EXPIRED: { status: 401, rpc: -32001, message: 'Unauthorized: the access token has expired or is not valid yet; get a new one' },
  GW_ERR_AUTH_SCOPE: { status: 403, rpc: -32001, message: 'Forbidden: the access token lacks the scope %s' },
  GW_ERR_AUTH_UNAVAILABLE: { status: 503, rpc: -32603, message: 'the authorization server\'s signing keys cannot be fetched: %s' },
  GW_ERR_AUTH_REJECTED: { status: 401, rpc: -32001, message: 'Unauthorized: the access token is not accepted: %s' },
  GW_ERR_AUTH_REVOKED: { status: 401, rpc: -32001, message: 'Unauthorized: the credential this exchange was opened with was revoked: %s; authenticate again' },

  GW_ERR_RATE_LIMITED: { status: 429, rpc: -32056, message: 'Too Many Requests: %s (limits.%s); retry after %s s' },
  GW_ERR_POLL_TOO_FAST: { status: 429, rpc: -32056, message: "Too Many Requests: task '%s' is polled faster than every %s ms (tasks.pollInterval, limits.pollBurst); retry after %s s" },
  GW_ERR_SESSION_LIMIT: { status: 429, rpc: -32057, message: 'Too Many Requests: %s sessions are open for this principal (limits.sessionsPerPrincipal); end unused ones with DELETE or let them expire' },
  GW_ERR_STREAM_LIMIT: { status: 429, rpc: -32058, message: 'Too Many Requests: this session already holds %s open SSE streams on this gateway process (limits.streamsPerSession); close one first' },

  GW_ERR_ADMIN_TOKEN_MISSING: { status: 401, rpc: -32001, message: 'Unauthorized: the admin API needs Authorization: Bearer <admin token> (the token whose SHA-256 is admin.tokenSha256)' },
  GW_ERR_ADMIN_TOKEN_INVALID: { status: 401, rpc: -32001, message: 'Unauthorized: the bearer token is not the admin token (its SHA-256 must equal admin.tokenSha256)' },
  GW_ERR_ADMIN_READ_ONLY: { status: 403, rpc: -32001, message: 'Forbidden: the read-only token (admin.readTokenSha256) opens the metrics and the GET routes of the admin API only; %s %s needs the admin token' },
  GW_ERR_ADMIN_BAD_REQUEST: { status: 400, rpc: -32602, message: 'Bad Request: %s' },
  GW_ERR_ADMIN_NOT_FOUND: { status: 404, rpc: -32601, message: 'Not Found: %s %s is not a route of the admin API' },
  GW_ERR_ADMIN_TASK_NOT_FOUND: { status: 404, rpc: -32602, message: "Not Found: task '%s' does not exist or has passed its TTL" },
  GW_ERR_ADMIN_TASK_TERMINAL: { status: 409, rpc: -32602, message: "Conflict: task '%s' is already %s; only working and input_required tasks can be cancelled" },

  GW_ERR_STORE_SCHEMA: { status: 500, rpc: -32603, message: 'store schema version %s is newer than this gateway supports (%s); upgrade the gateway' },
  GW_ERR_STORE_UNAVAILABLE: { status: 503, rpc: -32603, message: 'the store is unavailable: %s', retryAfter: 1 },
  GW_ERR_STORE_LOCKED: { status: 500, rpc: -32603, message: "store file '%s' is in use by the gateway process with pid %s on host %s since %s; stop that process first (one gateway process per SQLite file; use the redis or postgres store to run several)" },

  GW_ERR_PEER_LOST: { status: 503, rpc: -32603, message: 'the gateway process holding this %s is gone; start the request again' },
  GW_ERR_SHUTTING_DOWN: { status: 503, rpc: -32603, message: 'the gateway is shutting down; retry on another instance' },
  GW_ERR_SHUTDOWN_INCOMPLETE: { status: 500, rpc: -32603, message: 'shutdown ran every step, but %s failed: %s (each failure is logged, and kept in the cause)' },
  GW_ERR_INTERNAL: { status: 500, rpc: -32603, message: 'internal gateway error: %s' },
} as const satisfies Record<string, ErrorDef>

export type ErrorCode = keyof typeof ERRORS

function format (template: string, args: readonly unknown[]): string {
  let i = 0
  return template.replace(/%s/g, () => {
    const arg = args[i++]
    return arg === undefined ? '' : String(arg)
  })
}

export interface GatewayErrorOptions extends ErrorOptions {
  /** Goes out as the JSON-RPC error's `data`. */
  data?: unknown
  /** Seconds to wait before trying again, instead of the table's (see ErrorDef.retryAfter). */
  retryAfter?: number | undefined
}

export class GatewayError extends Error {
  readonly code: ErrorCode
  readonly statusCode: number
  readonly rpcCode: number
  readonly data: unknown
  /** Seconds a client should wait before trying again; undefined when nobody knows. */
  readonly retryAfter: number | undefined

  constructor (code: ErrorCode, args: readonly unknown[] = [], options: GatewayErrorOptions = {}) {
    const def: ErrorDef = ERRORS[code]
    super(format(def.message, args), options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'GatewayError'
    this.code = code
    this.statusCode = def.status
    this.rpcCode = def.rpc
    this.data = options.data
    this.retryAfter = options.retryAfter ?? def.retryAfter
  }
}

export function gatewayError (code: ErrorCode, ...args: unknown[]): GatewayError {
  return new GatewayError(code, args)
}

/** A JSON-RPC error received from an upstream or a downstream peer, kept verbatim. */
export class RpcError extends Error {
  readonly rpcCode: number
  readonly data: unknown

  constructor (code: number, message: string, data?: unknown) {
    super(message)
    this.name = 'RpcError'
    this.rpcCode = code
    this.data = data
  }
}

/**
 * An upstream's HTTP answer with a status outside 2xx that carried no JSON-RPC error. The message names the
 * status only; what the upstream wrote in the body is the `cause`, for the log: it may hold the upstream's
 * internals, and reaches no client.
 */
export class UpstreamHttpError extends Error {
  readonly status: number
  /** Seconds the upstream asked to wait (its Retry-After header), if it said. */
  readonly retryAfter: number | undefined

  constructor (status: number, body: string, retryAfter?: number) {
    super(`the upstream answered HTTP ${status}`, body === '' ? undefined : { cause: new Error(`the upstream's body: ${body}`) })
    this.name = 'UpstreamHttpError'
    this.status = status
    this.retryAfter = retryAfter
  }
}

/** Whether an abort hands a task's upstream work over to another process (which goes on with it) rather than stopping it. */
export function isHandover (reason: unknown): boolean {
  return reason instanceof GatewayError && reason.code === 'GW_ERR_TASK_HANDED_OVER'
}

export interface WireError {
  code: number
  message: string
  data?: unknown
}

export function errorMessage (err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
