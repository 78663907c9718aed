/**
 * How the gateway authenticates itself to an upstream on behalf of one caller (issue: upstream credentials).
 * Each way (`upstreams[].credentials`: per-principal static keys, OAuth client credentials, OAuth token
 * exchange) is one implementation of UpstreamCredentials; the HTTP transport asks it for the headers of every
 * request it sends, so a token refreshed between two requests of one upstream session is picked up.
 *
 * A credential is never passed through from the caller (that is `forwardAuthorization`, kept apart): what goes
 * upstream was made for that upstream.
 */
import { GatewayError } from '../../errors.ts'

/** Whom a request to an upstream is made for. */
export interface CredentialSubject {
  /** The authenticated principal; undefined when the gateway runs without auth. */
  readonly principal: string | undefined
  /**
   * The caller's own access token (the gateway is its resource server), for a grant that exchanges it
   * (RFC 8693); undefined for work that no longer has its caller (a task resumed by another process).
   */
  readonly subjectToken?: string | undefined
}

/** What one request to the upstream is sent with. */
export interface UpstreamAuthHeaders {
  /** Header names (lower case) and values, added to the configured headers (and replacing a same-named one). */
  readonly headers: Readonly<Record<string, string>>
}

export interface UpstreamCredentials {
  /**
   * Whom an upstream session may be shared by: `gateway` (one identity for every caller: sessions are shared as
   * without credentials) or `principal` (a session carries one principal's credential and serves only that
   * principal).
   */
  readonly sharing: 'gateway' | 'principal'
  /**
   * The headers for a request made for `subject`: from a cache while the credential is fresh, else obtained
   * (one request to the authorization server however many callers wait). Rejects with a GatewayError naming the
   * upstream and the reason (never an authorization server's raw answer, never a token) when none can be had.
   */
  headersFor (subject: CredentialSubject, signal?: AbortSignal): Promise<UpstreamAuthHeaders>
  /**
   * The upstream answered 401 to a request sent with `sent` for `subject`: the credential is dropped so the next
   * headersFor obtains a new one. `wwwAuthenticate` is the answer's WWW-Authenticate header (RFC 9728 discovery).
   * Returns whether a retry with new headers may succeed (false: the same credential would be sent again).
   */
  rejected (subject: CredentialSubject, sent: UpstreamAuthHeaders, wwwAuthenticate: string | undefined): boolean
  /**
   * A refusal known without asking anyone (no key for this principal): such a caller is not shown the upstream's
   * tools, prompts and resources, and is refused a session with this error. Undefined when headersFor may
   * succeed. Optional: a way that can always try (an OAuth grant) leaves it out.
   */
  refusal? (subject: CredentialSubject): Error | undefined
  /** Reads again what the credentials were configured from (key files, the environment): a configuration reload. */
  reload? (): void
  /** Stops timers and closes connections to the authorization server. */
  close (): Promise<void>
}

/** The errors that say no credential could be had for a caller: told to that caller as they are. */
const CREDENTIAL_CODES: ReadonlySet<string> = new Set([
  'GW_ERR_UPSTREAM_NO_CREDENTIAL',
  'GW_ERR_UPSTREAM_TOKEN_REFUSED',
  'GW_ERR_UPSTREAM_AUTH_SERVER_UNAVAILABLE',
  'GW_ERR_UPSTREAM_AUTH_DISCOVERY',
  'GW_ERR_UPSTREAM_SUBJECT_TOKEN_MISSING',
])

/**
 * The credentials' own error behind `err` (an upstream session that could not open because its first request got
 * no credential: the transport and the SDK wrap what headersFor threw), looked for along the `cause` chain;
 * undefined when the failure was not the credentials'.
 */
export function credentialFailure (err: unknown): GatewayError | undefined {
  let current = err
  for (let depth = 0; depth < 6 && current instanceof Error; depth++) {
    if (current instanceof GatewayError && CREDENTIAL_CODES.has(current.code)) return current
    current = current.cause
  }
  return undefined
}
