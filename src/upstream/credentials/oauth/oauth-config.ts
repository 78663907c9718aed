/**
 * `upstreams[].credentials: { kind: oauth }` as the OAuth library takes it: the configuration's names mapped onto
 * OAuthCredentialsOptions (no secret in either: both name where the secret is read from), and the credentials
 * built from them. Building reads the client secret or private key and imports the key, which is asynchronous,
 * while an upstream is made synchronously at start and at reload: DeferredCredentials stands in for the
 * credentials until they are built (the first request waits for that; the loader has already checked that the
 * files and variables can be read, so what is left to fail is a key that cannot sign).
 */
import type { OAuthCredentialsConfig } from '../../../config/credentials-schema.ts'
import type { CredentialSubject, UpstreamAuthHeaders, UpstreamCredentials } from '../upstream-credentials.ts'
import type { ClientAuthOptions, OAuthCredentialsOptions } from './oauth-options.ts'

function clientAuth (config: OAuthCredentialsConfig): ClientAuthOptions {
  if (config.clientAuth === 'private_key_jwt') {
    return { method: 'private_key_jwt', keyFile: config.privateKeyFile ?? '', alg: config.signingAlgorithm, kid: config.keyId }
  }
  return { method: config.clientAuth, secretFile: config.clientSecretFile, secretEnv: config.clientSecretEnv }
}

/** The library's options for the upstream `name` at `url` (its MCP endpoint: where discovery starts). */
export function oauthOptions (name: string, url: string, config: OAuthCredentialsConfig): OAuthCredentialsOptions {
  return {
    upstream: name,
    url,
    clientId: config.clientId,
    clientAuth: clientAuth(config),
    scope: config.scope,
    issuer: config.issuer,
    tokenEndpoint: config.tokenEndpoint,
    resource: config.resource,
    audience: config.grant === 'token_exchange' ? config.audience : undefined,
    timeoutMs: config.timeout,
    refreshSkewMs: config.refreshBefore,
    initialBackoffMs: config.retryBackoff,
    maxBackoffMs: config.maxRetryBackoff,
    maxCachedTokens: config.maxCachedTokens,
  }
}

/**
 * Credentials still being built: every method waits for them (or, for the synchronous ones, answers as credentials
 * that have sent nothing yet would). A build that fails makes every request fail with its error, which names the
 * upstream and the option, never a secret.
 */
export class DeferredCredentials implements UpstreamCredentials {
  readonly sharing: 'gateway' | 'principal'
  readonly #built: Promise<UpstreamCredentials>
  #ready: UpstreamCredentials | undefined
  #closed = false

  constructor (sharing: 'gateway' | 'principal', build: () => Promise<UpstreamCredentials>) {
    this.sharing = sharing
    this.#built = build()
    this.#built.then((credentials) => {
      this.#ready = credentials
      // Closed while it was built: nothing may keep its timers or connections.
      if (this.#closed) void credentials.close()
    }, () => {
      // Said by every request that needs the credentials (headersFor rejects with it).
    })
  }

  /** The credentials once built (tests read their counters); undefined before. */
  get built (): UpstreamCredentials | undefined {
    return this.#ready
  }

  async headersFor (subject: CredentialSubject, signal?: AbortSignal): Promise<UpstreamAuthHeaders> {
    const credentials = this.#ready ?? await this.#built
    return await credentials.headersFor(subject, signal)
  }

  /** Headers were sent, so the credentials are built. */
  rejected (subject: CredentialSubject, sent: UpstreamAuthHeaders, wwwAuthenticate: string | undefined): boolean {
    return this.#ready?.rejected(subject, sent, wwwAuthenticate) ?? false
  }

  async close (): Promise<void> {
    this.#closed = true
    await this.#ready?.close()
  }
}
