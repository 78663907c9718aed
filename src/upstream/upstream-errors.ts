import { ProtocolError, SdkError, SdkErrorCode } from '@modelcontextprotocol/client'
import { GatewayError, RpcError, UpstreamHttpError, errorMessage } from '../errors.ts'
import type { UpstreamConfig } from '../config/schema.ts'
import { formatDuration } from '../config/units.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import { responseTooLarge } from './response-limit.ts'
import { streamResumeFailed } from './stream-resume.ts'
import { credentialFailure } from './credentials/upstream-credentials.ts'

/** Network failures by their `code` (undici's own, or Node's system errors undici passes on): timeouts, by the limit that ran out. */
const TIMED_OUT: Readonly<Record<string, string>> = {
  UND_ERR_CONNECT_TIMEOUT: 'timeouts.connect (no connection could be opened)',
  UND_ERR_HEADERS_TIMEOUT: "the HTTP client's headers timeout",
  UND_ERR_BODY_TIMEOUT: "the HTTP client's body timeout",
}
/** No connection could be opened: the request never left the gateway. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH'])
/** The connection broke with the request on it: the upstream may have acted on it. */
const CONNECTION_LOST = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE', 'UND_ERR_CLOSED'])
/** HTTP answers that say "not now" rather than "failed". */
const OVERLOADED_STATUSES = new Set([429, 503])

/** The `code` of a network failure, looked for along the `cause` chain (undici's fetch wraps it in a TypeError). */
function networkCode (err: unknown): string | undefined {
  let current = err
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === 'string') return code
    current = current.cause
  }
  return undefined
}

/** What an HTTP error status of the upstream becomes; the upstream's body stays in the cause, out of the message. */
function fromHttpStatus (err: UpstreamHttpError, upstream: string, what: string): GatewayError {
  if (OVERLOADED_STATUSES.has(err.status)) {
    return new GatewayError('GW_ERR_UPSTREAM_OVERLOADED', [upstream, what, err.status], {
      cause: err,
      retryAfter: err.retryAfter,
      ...(err.retryAfter !== undefined && { data: { retryAfter: err.retryAfter } }),
    })
  }
  return new GatewayError('GW_ERR_UPSTREAM_FAILED', [upstream, what, `it answered HTTP ${err.status}`], { cause: err })
}

/** What a network failure becomes, by its code; undefined for one this table does not know. */
function fromNetworkCode (err: unknown, upstream: string, what: string): GatewayError | undefined {
  const code = networkCode(err)
  if (code === undefined) return undefined
  const limit = TIMED_OUT[code]
  if (limit !== undefined) return new GatewayError('GW_ERR_UPSTREAM_TIMEOUT', [upstream, what, `${limit} (${code})`], { cause: err })
  if (UNREACHABLE.has(code)) return new GatewayError('GW_ERR_UPSTREAM_UNREACHABLE', [upstream, what, code], { cause: err })
  if (CONNECTION_LOST.has(code)) return new GatewayError('GW_ERR_UPSTREAM_CONNECTION_LOST', [upstream, what, code], { cause: err })
  return undefined
}

/** Where an upstream error's own data waits while the SDK reads the error (see shieldErrorData). */
const SHIELDED_DATA = 'io.mcp-task-gateway/data'

/**
 * Called with every response of an upstream before the SDK reads it. The SDK turns a -32002 error whose data
 * names a `uri` (resource not found, in the 2025 protocol) into its own error of code -32602 with data
 * `{ uri }` only; such an error's data is wrapped so that the SDK keeps the error as it came, and
 * mapUpstreamError unwraps it: the client gets the code and data the upstream sent.
 */
export function shieldErrorData (response: JsonObject): void {
  const error = response.error as JsonObject | null | undefined
  const data = error?.data as JsonObject | null | undefined
  if (error?.code !== -32002 || typeof data?.uri !== 'string') return
  error.data = { [SHIELDED_DATA]: data }
}

/** An upstream error's data as the upstream sent it (see shieldErrorData). */
function unshielded (data: unknown): unknown {
  const wrapped = data as JsonObject | null | undefined
  return typeof wrapped === 'object' && wrapped !== null && SHIELDED_DATA in wrapped ? wrapped[SHIELDED_DATA] : data
}

/**
 * Turns whatever an upstream request threw into the error the client sees: a JSON-RPC error from the
 * upstream keeps its code, message and data; HTTP error statuses, network failures (by their code, as
 * @fastify/reply-from maps undici's) and timeouts become gateway errors that name the upstream and keep
 * the cause; an answer over its size limit (not read to its end) becomes GW_ERR_UPSTREAM_RESPONSE_TOO_LARGE or, for a
 * task's call, GW_ERR_TASK_RESULT_TOO_LARGE; a response stream the upstream closed and would not resume,
 * GW_ERR_UPSTREAM_CONNECTION_LOST. Nothing the upstream wrote outside a JSON-RPC error reaches the message.
 */
export function mapUpstreamError (err: unknown, upstream: string, what: string, timeoutMs: number, signal?: AbortSignal): Error {
  if (err instanceof GatewayError || err instanceof RpcError) return err
  // No credential for the request (headersFor failed in the transport, which the SDK may wrap): said as it is.
  const credential = credentialFailure(err)
  if (credential !== undefined) return credential
  const tooLarge = responseTooLarge(err)
  if (tooLarge !== undefined) return tooLarge.toGatewayError(upstream, what)
  const lost = streamResumeFailed(err)
  if (lost !== undefined) return new GatewayError('GW_ERR_UPSTREAM_CONNECTION_LOST', [upstream, what, lost.message], { cause: lost })
  if (signal?.aborted) {
    return new GatewayError('GW_ERR_REQUEST_CANCELLED', [errorMessage(signal.reason)], { cause: err })
  }
  // The SDK keeps the upstream's message as it was sent (a server built on SDK v1 starts its own with "MCP error <code>: ").
  if (err instanceof ProtocolError) return new RpcError(err.code, err.message, unshielded(err.data))
  if (err instanceof UpstreamHttpError) return fromHttpStatus(err, upstream, what)
  if (err instanceof SdkError) {
    switch (err.code) {
      case SdkErrorCode.RequestTimeout:
        return new GatewayError('GW_ERR_UPSTREAM_TIMEOUT', [upstream, what, `${timeoutMs}ms`], { cause: err })
      case SdkErrorCode.ConnectionClosed:
      case SdkErrorCode.NotConnected:
      case SdkErrorCode.SendFailed:
        return new GatewayError('GW_ERR_UPSTREAM_CONNECTION_LOST', [upstream, what, err.message], { cause: err })
      default:
        return new GatewayError('GW_ERR_UPSTREAM_FAILED', [upstream, what, err.message], { cause: err })
    }
  }
  return fromNetworkCode(err, upstream, what) ?? new GatewayError('GW_ERR_UPSTREAM_FAILED', [upstream, what, errorMessage(err)], { cause: err })
}

/** Connect failures an operator can act on, by their network code: what to say instead of the library's text. */
const CONNECT_FAILURES: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host name not found',
  EAI_AGAIN: 'host name lookup failed for now',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ECONNRESET: 'connection reset',
  UND_ERR_CONNECT_TIMEOUT: 'no connection within the connect timeout',
}
const CONNECT_FAILURE_CODE = new RegExp(`\\b(${Object.keys(CONNECT_FAILURES).join('|')})\\b`)

/** The network code of a connect failure, from the `code` of any error on its cause chain, else from its message. */
function connectFailureCode (err: unknown): string | undefined {
  let current = err
  for (let depth = 0; depth < 6 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === 'string' && code in CONNECT_FAILURES) return code
    const named = CONNECT_FAILURE_CODE.exec(current.message)?.[1]
    if (named !== undefined) return named
    current = current.cause
  }
  return undefined
}

/** An HTTP upstream's URL as a reason shows it: without credentials in it or the values of its query (they may hold a key). */
function shownUrl (url: string): string {
  const parsed = new URL(url)
  return `${parsed.origin}${parsed.pathname}`
}

/**
 * Why a connect failed, naming the option to change when it timed out, and for an HTTP upstream that could
 * not be reached, what happened where (`connection refused at http://host:port/mcp (ECONNREFUSED)`).
 */
export function connectFailure (err: unknown, config: UpstreamConfig): string {
  if (err instanceof SdkError && err.code === SdkErrorCode.RequestTimeout) {
    const slow = config.transport === 'stdio' ? 'a server that starts slowly (one a package runner downloads first)' : 'a server that answers slowly'
    return `connect failed: the MCP handshake did not finish within ${formatDuration(config.timeouts.connect)} (timeouts.connect of upstream '${config.name}'); raise timeouts.connect for ${slow}`
  }
  const code = config.transport === 'stdio' ? undefined : connectFailureCode(err)
  if (code !== undefined && config.transport !== 'stdio') return `connect failed: ${CONNECT_FAILURES[code]!} at ${shownUrl(config.url)} (${code})`
  return `connect failed: ${errorMessage(err)}`
}
