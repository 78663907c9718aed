/**
 * What an upstream's OAuth credentials are built from: the shape the configuration maps onto (an
 * `upstreams[].credentials` entry of kind `oauth`, by oauthOptions in oauth-config.ts), with the defaults in one
 * place. Secrets are named by where they are read from (a file or an environment variable), so
 * this object itself may be logged.
 */

/** How the gateway authenticates itself as an OAuth client at the token endpoint. */
export type ClientAuthOptions =
  | {
    readonly method: 'client_secret_basic' | 'client_secret_post'
    /** A file holding the client secret (surrounding whitespace is trimmed). One of file or env. */
    readonly secretFile?: string | undefined
    /** An environment variable holding the client secret. */
    readonly secretEnv?: string | undefined
  }
  | {
    readonly method: 'private_key_jwt'
    /** A file holding the private key: PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`) or a private JWK (JSON). */
    readonly keyFile: string
    /** The JWS algorithm of the client assertion; from the JWK's `alg`, else RS256 for RSA and ES256 for EC keys. */
    readonly alg?: string | undefined
    /** The `kid` header of the assertion; from the JWK's `kid` when unset. */
    readonly kid?: string | undefined
  }

export interface OAuthCredentialsOptions {
  /** The upstream's name, for errors and logs. */
  readonly upstream: string
  /** The upstream's MCP endpoint: where discovery starts, and the resource tokens are asked for (RFC 8707). */
  readonly url: string
  readonly clientId: string
  readonly clientAuth: ClientAuthOptions
  /** Space-separated scopes to ask for; none by default. */
  readonly scope?: string | undefined
  /**
   * The authorization server's issuer. Set: the upstream's protected resource metadata is not fetched, and the
   * server's metadata is (RFC 8414, then OpenID Connect discovery).
   */
  readonly issuer?: string | undefined
  /** The token endpoint. Set: no discovery at all (with `issuer` as the assertion audience, else its origin). */
  readonly tokenEndpoint?: string | undefined
  /** The resource indicator sent (RFC 8707); by default the protected resource metadata's `resource`, else `url`. */
  readonly resource?: string | undefined
  /** The `audience` parameter of a token exchange (RFC 8693), for servers that name upstreams so; none by default. */
  readonly audience?: string | undefined
  /** The longest wait for one answer of the authorization server or the upstream's metadata (default 10 s). */
  readonly timeoutMs?: number | undefined
  /** A token is renewed this long before its `expires_in` runs out (default 30 s, at most half its lifetime). */
  readonly refreshSkewMs?: number | undefined
  /** After a failed token request the next waits this long (default 1 s), doubling up to `maxBackoffMs`. */
  readonly initialBackoffMs?: number | undefined
  readonly maxBackoffMs?: number | undefined
  /** How many principals' exchanged tokens are kept at most (default 10,000; the least recently used go first). */
  readonly maxCachedTokens?: number | undefined
  /** The clock, in milliseconds (tests move it). */
  readonly now?: (() => number) | undefined
  /** The environment secrets are read from (default process.env). */
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
}

export interface ResolvedTimings {
  readonly timeoutMs: number
  readonly refreshSkewMs: number
  readonly initialBackoffMs: number
  readonly maxBackoffMs: number
  readonly maxCachedTokens: number
  readonly now: () => number
}

export function resolveTimings (options: OAuthCredentialsOptions): ResolvedTimings {
  return {
    timeoutMs: options.timeoutMs ?? 10_000,
    refreshSkewMs: options.refreshSkewMs ?? 30_000,
    initialBackoffMs: options.initialBackoffMs ?? 1_000,
    maxBackoffMs: options.maxBackoffMs ?? 30_000,
    maxCachedTokens: options.maxCachedTokens ?? 10_000,
    now: options.now ?? Date.now,
  }
}

/** Whether `url` is served on this host, where plain HTTP is accepted (everywhere else HTTPS is required). */
export function isLoopback (url: URL): boolean {
  const host = url.hostname
  return host === 'localhost' || host === '[::1]' || /^127(\.\d{1,3}){3}$/.test(host)
}
