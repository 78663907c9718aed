/**
 * The requests the gateway makes at an authorization server's token endpoint, one method per grant:
 * client credentials, token exchange (RFC 8693) and refresh. Each asks for the upstream's resource (RFC 8707),
 * authenticates the gateway as its client, and gives back the token with its expiry on the caller's clock, or
 * throws a TokenFailure whose text holds no token or secret. oauth4webapi builds the requests and checks the
 * answers (JSON, token type, error bodies); plain HTTP is allowed only to a server on this host.
 */
import * as oauth from 'oauth4webapi'
import type { AuthorizationServerDiscovery, DiscoveredServer } from './authorization-server-discovery.ts'
import { fetchWithTimeout } from './authorization-server-discovery.ts'
import type { ClientAuthentication } from './client-authentication.ts'
import { isLoopback, type OAuthCredentialsOptions, type ResolvedTimings } from './oauth-options.ts'
import type { ObtainedToken } from './token-cache.ts'
import { classifyTokenError, TokenFailure } from './token-failure.ts'

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange'
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token'

export class TokenEndpoint {
  readonly #options: OAuthCredentialsOptions
  readonly #timings: ResolvedTimings
  readonly #discovery: AuthorizationServerDiscovery
  readonly #auth: ClientAuthentication
  readonly #client: oauth.Client
  readonly #fetch: ReturnType<typeof fetchWithTimeout>
  /** Token requests sent, for tests and metrics. */
  requests = 0

  constructor (
    options: OAuthCredentialsOptions,
    timings: ResolvedTimings,
    discovery: AuthorizationServerDiscovery,
    auth: ClientAuthentication,
  ) {
    this.#options = options
    this.#timings = timings
    this.#discovery = discovery
    this.#auth = auth
    this.#client = { client_id: options.clientId }
    this.#fetch = fetchWithTimeout(timings.timeoutMs)
  }

  /** A token for the gateway itself (client credentials grant). */
  async clientCredentials (): Promise<ObtainedToken> {
    return await this.#request([], async (found, options) => {
      const params = this.#resourceParams(found)
      const res = await oauth.clientCredentialsGrantRequest(found.server, this.#client, this.#auth.apply, params, options)
      return await oauth.processClientCredentialsResponse(found.server, this.#client, res)
    })
  }

  /** The caller's access token exchanged for one the upstream accepts (RFC 8693). */
  async exchange (subjectToken: string): Promise<ObtainedToken> {
    return await this.#request([subjectToken], async (found, options) => {
      const params = this.#resourceParams(found)
      params.set('subject_token', subjectToken)
      params.set('subject_token_type', ACCESS_TOKEN_TYPE)
      params.set('requested_token_type', ACCESS_TOKEN_TYPE)
      if (this.#options.audience !== undefined) params.set('audience', this.#options.audience)
      const { server } = found
      const res = await oauth.genericTokenEndpointRequest(server, this.#client, this.#auth.apply, TOKEN_EXCHANGE_GRANT, params, options)
      return await oauth.processGenericTokenEndpointResponse(found.server, this.#client, res)
    })
  }

  /**
   * A new access token from a refresh token an earlier grant returned. With `issuer` (the server that issued it),
   * the token is sent only if the upstream's authorization server is still that one; else the grant is refused.
   */
  async refresh (refreshToken: string, issuer?: string): Promise<ObtainedToken> {
    const sameIssuer = (found: DiscoveredServer): void => {
      if (issuer !== undefined && found.server.issuer !== issuer) {
        throw new TokenFailure('refused', `the stored grant was issued by '${issuer}', and the upstream's authorization server is now '${found.server.issuer}'`)
      }
    }
    return await this.#request([refreshToken], async (found, options) => {
      const res = await oauth.refreshTokenGrantRequest(found.server, this.#client, this.#auth.apply, refreshToken, {
        ...options,
        additionalParameters: this.#resourceParams(found),
      })
      const answer = await oauth.processRefreshTokenResponse(found.server, this.#client, res)
      // A server that does not rotate refresh tokens returns none: the one used stays good.
      return answer.refresh_token === undefined ? { ...answer, refresh_token: refreshToken } : answer
    }, sameIssuer)
  }

  #resourceParams (found: DiscoveredServer): URLSearchParams {
    const params = new URLSearchParams({ resource: found.resource })
    if (this.#options.scope !== undefined) params.set('scope', this.#options.scope)
    return params
  }

  async #request (
    secrets: ReadonlyArray<string | undefined>,
    send: (found: DiscoveredServer, options: oauth.TokenEndpointRequestOptions) => Promise<oauth.TokenEndpointResponse>,
    /** Checks the discovered server before anything is sent to it (throws a TokenFailure to send nothing). */
    before?: (found: DiscoveredServer) => void,
  ): Promise<ObtainedToken> {
    const all = [...secrets, this.#auth.secret]
    try {
      const found = await this.#discovery.discover()
      const options: oauth.TokenEndpointRequestOptions = {
        [oauth.customFetch]: this.#fetch,
        [oauth.allowInsecureRequests]: isLoopback(new URL(found.server.token_endpoint!)),
      }
      before?.(found)
      this.requests++
      const startedAt = this.#timings.now()
      const answer = await send(found, options)
      const expiresIn = typeof answer.expires_in === 'number' && answer.expires_in > 0 ? answer.expires_in : undefined
      return {
        accessToken: answer.access_token,
        expiresAt: expiresIn === undefined ? undefined : startedAt + expiresIn * 1000,
        refreshToken: answer.refresh_token,
        issuer: found.server.issuer,
      }
    } catch (err) {
      throw classifyTokenError(err, this.#timings.timeoutMs, all)
    }
  }
}
