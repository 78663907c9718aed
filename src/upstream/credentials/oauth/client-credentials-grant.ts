/**
 * Upstream credentials of one service identity: the gateway's own OAuth client gets a token for the upstream's
 * resource with the client credentials grant, and every caller's requests carry it (`sharing: 'gateway'`). The
 * token is cached until shortly before it expires and renewed by one request however many calls wait.
 */
import type { CredentialSubject, UpstreamAuthHeaders, UpstreamCredentials } from '../upstream-credentials.ts'
import { AuthorizationServerDiscovery } from './authorization-server-discovery.ts'
import { loadClientAuthentication } from './client-authentication.ts'
import { resolveTimings, type OAuthCredentialsOptions } from './oauth-options.ts'
import { TokenCache } from './token-cache.ts'
import { TokenEndpoint } from './token-endpoint.ts'

const GATEWAY_KEY = 'gateway'

export function bearer (accessToken: string): UpstreamAuthHeaders {
  return { headers: { authorization: `Bearer ${accessToken}` } }
}

/** The access token in headers this library made (`Bearer <token>`), if they are such. */
export function bearerTokenOf (sent: UpstreamAuthHeaders): string | undefined {
  const value = sent.headers.authorization
  return value?.startsWith('Bearer ') === true ? value.slice('Bearer '.length) : undefined
}

export class OAuthClientCredentials implements UpstreamCredentials {
  readonly sharing = 'gateway'
  readonly #discovery: AuthorizationServerDiscovery
  readonly #endpoint: TokenEndpoint
  readonly #cache: TokenCache

  private constructor (discovery: AuthorizationServerDiscovery, endpoint: TokenEndpoint, cache: TokenCache) {
    this.#discovery = discovery
    this.#endpoint = endpoint
    this.#cache = cache
  }

  /** Reads the client secret or key (a configuration error if it cannot be read); asks nothing of the network yet. */
  static async create (options: OAuthCredentialsOptions): Promise<OAuthClientCredentials> {
    const timings = resolveTimings(options)
    const discovery = new AuthorizationServerDiscovery(options, timings.timeoutMs)
    const auth = await loadClientAuthentication(options.upstream, options.clientAuth, options.env)
    const endpoint = new TokenEndpoint(options, timings, discovery, auth)
    return new OAuthClientCredentials(discovery, endpoint, new TokenCache(options.upstream, timings))
  }

  /** Token requests sent to the authorization server so far. */
  get tokenRequests (): number {
    return this.#endpoint.requests
  }

  async headersFor (_subject: CredentialSubject, signal?: AbortSignal): Promise<UpstreamAuthHeaders> {
    const token = await this.#cache.get(GATEWAY_KEY, async () => await this.#endpoint.clientCredentials(), signal)
    return bearer(token.accessToken)
  }

  rejected (_subject: CredentialSubject, sent: UpstreamAuthHeaders, wwwAuthenticate: string | undefined): boolean {
    const moved = this.#discovery.learn(wwwAuthenticate)
    if (moved) this.#cache.clear()
    const token = bearerTokenOf(sent)
    const retry = token === undefined ? true : this.#cache.drop(GATEWAY_KEY, token)
    return moved || retry
  }

  async close (): Promise<void> {
    this.#cache.clear()
  }
}
