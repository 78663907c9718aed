/**
 * Why no token could be had, sorted into what the caller is told: refused (the authorization server said no:
 * 403), unavailable (it cannot be reached, timed out or failed: 503 with Retry-After), discovery (the upstream or
 * its server does not say how to get a token: 502) or missing (no caller token to exchange: 403). The text that
 * reaches a caller or a log is built here only, from the server's `error` code and a short description with
 * every known secret cut out; the original error is never kept as a cause, since a library's error may hold the
 * request or the answer.
 */
import * as oauth from 'oauth4webapi'
import { GatewayError, errorMessage } from '../../../errors.ts'

export type TokenFailureKind = 'refused' | 'unavailable' | 'discovery' | 'missing'

export class TokenFailure extends Error {
  readonly kind: TokenFailureKind

  constructor (kind: TokenFailureKind, reason: string) {
    super(reason)
    this.name = 'TokenFailure'
    this.kind = kind
  }
}

const MAX_REASON = 300

/** `text` with every secret in `secrets` replaced, and cut to a length a log line can carry. */
export function withoutSecrets (text: string, secrets: ReadonlyArray<string | undefined>): string {
  let out = text
  for (const secret of secrets) {
    if (secret !== undefined && secret.length >= 4) out = out.split(secret).join('[redacted]')
  }
  // Anything shaped like a JWT is cut out too: a server may echo a token it was sent.
  out = out.replace(/eyJ[\w-]+\.[\w-]+\.[\w-]*/g, '[redacted]')
  return out.length > MAX_REASON ? `${out.slice(0, MAX_REASON)}…` : out
}

function describeOAuthError (error: string, description: string | undefined): string {
  return description === undefined || description === '' ? error : `${error} (${description})`
}

function isNetworkFailure (err: unknown): boolean {
  if (!(err instanceof Error)) return false
  return err.name === 'TimeoutError' || err.name === 'AbortError' || (err instanceof TypeError && err.message === 'fetch failed')
}

/** Why a fetch did not get an answer, in words: "no answer within 10000 ms", "connection refused". */
export function networkReason (err: unknown, timeoutMs: number): string {
  if (err instanceof Error && err.name === 'TimeoutError') return `no answer within ${timeoutMs} ms`
  if (err instanceof Error && err.name === 'AbortError') return 'the request was aborted'
  const code = (err as { cause?: { code?: unknown } }).cause?.code
  if (code === 'ECONNREFUSED') return 'connection refused'
  if (typeof code === 'string') return `connection failed (${code})`
  return `connection failed (${errorMessage((err as { cause?: unknown }).cause ?? err)})`
}

/** Sorts an error of a token request (oauth4webapi's or the network's) into a TokenFailure. */
export function classifyTokenError (err: unknown, timeoutMs: number, secrets: ReadonlyArray<string | undefined>): TokenFailure {
  if (err instanceof TokenFailure) return err
  if (isNetworkFailure(err)) return new TokenFailure('unavailable', `its token endpoint: ${networkReason(err, timeoutMs)}`)
  if (err instanceof oauth.ResponseBodyError) {
    const reason = withoutSecrets(describeOAuthError(err.error, err.error_description), secrets)
    return new TokenFailure(err.status >= 500 || err.error === 'temporarily_unavailable' ? 'unavailable' : 'refused', `${reason} (HTTP ${err.status})`)
  }
  if (err instanceof oauth.WWWAuthenticateChallengeError) {
    const challenge = err.cause[0]
    const reason = challenge?.parameters.error === undefined
      ? 'the client was not authenticated'
      : describeOAuthError(challenge.parameters.error, challenge.parameters.error_description)
    return new TokenFailure('refused', `${withoutSecrets(reason, secrets)} (HTTP ${err.status})`)
  }
  if (err instanceof oauth.OperationProcessingError) {
    const status = err.cause instanceof Response ? err.cause.status : undefined
    if (status !== undefined && (status >= 500 || status === 429)) return new TokenFailure('unavailable', `its token endpoint answered HTTP ${status}`)
    // The message says what was wrong with the answer; it never quotes the answer itself.
    return new TokenFailure('refused', `the answer is not a usable token response: ${withoutSecrets(err.message, secrets)}${status === undefined ? '' : ` (HTTP ${status})`}`)
  }
  return new TokenFailure('unavailable', withoutSecrets(errorMessage(err), secrets))
}

/** The GatewayError a caller gets for `failure` of upstream `upstream`; `retryAfterS` for an unavailable server. */
export function toGatewayError (upstream: string, failure: TokenFailure, retryAfterS: number): GatewayError {
  const cause = new Error(failure.message)
  switch (failure.kind) {
    case 'refused': return new GatewayError('GW_ERR_UPSTREAM_TOKEN_REFUSED', [upstream, failure.message], { cause, data: { upstream, reason: failure.message } })
    case 'discovery': return new GatewayError('GW_ERR_UPSTREAM_AUTH_DISCOVERY', [upstream, failure.message], { cause, data: { upstream, reason: failure.message }, retryAfter: retryAfterS })
    case 'missing': return new GatewayError('GW_ERR_UPSTREAM_SUBJECT_TOKEN_MISSING', [upstream, failure.message], { cause, data: { upstream } })
    case 'unavailable': return new GatewayError('GW_ERR_UPSTREAM_AUTH_SERVER_UNAVAILABLE', [upstream, failure.message, retryAfterS], { cause, data: { upstream, reason: failure.message }, retryAfter: retryAfterS })
  }
}
