/**
 * Upstream credentials made for each caller: the caller's own access token (the gateway is its resource
 * server) is exchanged at the authorization server for a token whose audience is the upstream (RFC 8693), so
 * the upstream sees who calls without ever receiving a token made for someone else. Upstream sessions carry one
 * principal's token (`sharing: 'principal'`).
 *
 * Exchanged tokens are cached per principal and caller token, under a keyed hash of both (never the token
 * itself as a key), and renewed by one request however many calls wait. Work that no longer has its caller's
 * token (a task resumed by another process, or after a restart) is served with the refresh token the last
 * exchange or refresh for that principal returned, when the server gave one. With `grants` (a GrantVault), that
 * refresh token is sealed into the gateway's store at each exchange or refresh (the latest wins), read from
 * there by whichever process serves the resumed work, and deleted when the authorization server refuses it.
 * Without, it is kept in this process's memory, and `exportGrant`/`importGrant` hand it over.
 */
import { createHmac, randomBytes } from 'node:crypto'
import type { GrantVault, HeldGrant } from '../../../store/grant-vault.ts'
import type { CredentialSubject, UpstreamAuthHeaders, UpstreamCredentials } from '../upstream-credentials.ts'
import { AuthorizationServerDiscovery } from './authorization-server-discovery.ts'
import { loadClientAuthentication } from './client-authentication.ts'
import { bearer, bearerTokenOf } from './client-credentials-grant.ts'
import { resolveTimings, type OAuthCredentialsOptions } from './oauth-options.ts'
import { TokenCache, type Obtain, type ObtainedToken } from './token-cache.ts'
import { TokenEndpoint } from './token-endpoint.ts'
import { TokenFailure } from './token-failure.ts'

/** What renews a principal's upstream token without the caller: to be stored encrypted, never in clear. */
export interface ExportedGrant {
  readonly upstream: string
  readonly refreshToken: string
}

export interface TokenExchangeOptions extends OAuthCredentialsOptions {
  /**
   * Where the grant that renews each principal's token for work resumed without its caller is kept, sealed
   * (store/grant-vault.ts: the gateway's store, read by every process); none: this process's memory only.
   */
  readonly grants?: GrantVault | undefined
}

export class OAuthTokenExchange implements UpstreamCredentials {
  readonly sharing = 'principal'
  readonly #upstream: string
  readonly #discovery: AuthorizationServerDiscovery
  readonly #endpoint: TokenEndpoint
  readonly #cache: TokenCache
  /** The latest refresh token per principal, from an exchange or a refresh; memory only. */
  readonly #refreshTokens = new Map<string, string>()
  readonly #maxPrincipals: number
  /** Keys the hashes of cache keys, so a key seen in a heap dump or log cannot be tried against guessed tokens. */
  readonly #hashKey = randomBytes(32)
  readonly #clientId: string
  readonly #grants: GrantVault | undefined

  private constructor (
    options: TokenExchangeOptions,
    discovery: AuthorizationServerDiscovery,
    endpoint: TokenEndpoint,
    cache: TokenCache,
    maxPrincipals: number,
  ) {
    this.#upstream = options.upstream
    this.#clientId = options.clientId
    this.#grants = options.grants
    this.#discovery = discovery
    this.#endpoint = endpoint
    this.#cache = cache
    this.#maxPrincipals = maxPrincipals
  }

  /** Reads the client secret or key (a configuration error if it cannot be read); asks nothing of the network yet. */
  static async create (options: TokenExchangeOptions): Promise<OAuthTokenExchange> {
    const timings = resolveTimings(options)
    const discovery = new AuthorizationServerDiscovery(options, timings.timeoutMs)
    const auth = await loadClientAuthentication(options.upstream, options.clientAuth, options.env)
    const endpoint = new TokenEndpoint(options, timings, discovery, auth)
    return new OAuthTokenExchange(options, discovery, endpoint, new TokenCache(options.upstream, timings), timings.maxCachedTokens)
  }

  /** Token requests sent to the authorization server so far. */
  get tokenRequests (): number {
    return this.#endpoint.requests
  }

  async headersFor (subject: CredentialSubject, signal?: AbortSignal): Promise<UpstreamAuthHeaders> {
    const principal = subject.principal ?? ''
    const obtain: Obtain = async (previous) => await this.#obtain(principal, subject.subjectToken, previous)
    const token = await this.#cache.get(this.#keyOf(subject), obtain, signal)
    return bearer(token.accessToken)
  }

  rejected (subject: CredentialSubject, sent: UpstreamAuthHeaders, wwwAuthenticate: string | undefined): boolean {
    const moved = this.#discovery.learn(wwwAuthenticate)
    if (moved) this.#cache.clear()
    const token = bearerTokenOf(sent)
    const retry = token === undefined ? true : this.#cache.drop(this.#keyOf(subject), token)
    return moved || retry
  }

  /** What renews `principal`'s token after a restart or on another process; undefined when the server gave no refresh token. */
  exportGrant (principal: string | undefined): ExportedGrant | undefined {
    const refreshToken = this.#refreshTokens.get(principal ?? '')
    return refreshToken === undefined ? undefined : { upstream: this.#upstream, refreshToken }
  }

  /** Takes over a grant `exportGrant` gave (decrypted by the caller) for `principal`'s work without its caller. */
  importGrant (principal: string | undefined, grant: ExportedGrant): void {
    if (grant.upstream !== this.#upstream) throw new TypeError(`the grant is for upstream '${grant.upstream}', not '${this.#upstream}'`)
    this.#remember(principal ?? '', grant.refreshToken)
  }

  async close (): Promise<void> {
    this.#cache.clear()
    this.#refreshTokens.clear()
  }

  #keyOf (subject: CredentialSubject): string {
    const hmac = createHmac('sha256', this.#hashKey).update(subject.principal ?? '').update('\0')
    // Work without its caller has a key of its own per principal: it is served from the refresh token.
    hmac.update(subject.subjectToken === undefined ? '\0no-subject-token' : `\0${subject.subjectToken}`)
    return hmac.digest('base64url')
  }

  async #obtain (principal: string, subjectToken: string | undefined, previous: ObtainedToken | undefined): Promise<ObtainedToken> {
    let token: ObtainedToken
    if (subjectToken !== undefined) {
      token = await this.#endpoint.exchange(subjectToken)
    } else if (this.#grants !== undefined) {
      token = await this.#renewFromStore(principal, this.#grants)
    } else {
      const refreshToken = previous?.refreshToken ?? this.#refreshTokens.get(principal)
      if (refreshToken === undefined) {
        throw new TokenFailure('missing', 'the work was resumed without its caller, and no earlier exchange for this principal left a refresh token')
      }
      token = await this.#endpoint.refresh(refreshToken)
    }
    if (token.refreshToken !== undefined) {
      this.#remember(principal, token.refreshToken)
      // Rotation: the refresh token just returned is the one that works now, for every process.
      await this.#grants?.save(principal, this.#upstream, { issuer: token.issuer ?? '', clientId: this.#clientId, refreshToken: token.refreshToken })
    }
    return token
  }

  /**
   * A token for `principal`'s work without its caller, from the grant stored for it (whichever process stored
   * it last): never from a copy in memory, which another process's refresh may have used up. A refused grant
   * is tried again once when another process has meanwhile stored a newer one (both read the same refresh token,
   * and the server took it once); else it is deleted.
   */
  async #renewFromStore (principal: string, grants: GrantVault, again = false): Promise<ObtainedToken> {
    const held = await this.#loadGrant(principal, grants)
    if (held === undefined) {
      throw new TokenFailure('missing', 'the work was resumed without its caller, and no grant for this principal is stored ' +
        '(no exchange left a refresh token, or it expired or was refused)')
    }
    if (held.clientId !== this.#clientId) {
      await grants.forget(principal, this.#upstream, held)
      throw new TokenFailure('missing', `the work was resumed without its caller, and the grant stored for this principal was issued to client '${held.clientId}', not '${this.#clientId}'`)
    }
    try {
      return await this.#endpoint.refresh(held.refreshToken, held.issuer)
    } catch (err) {
      if (!(err instanceof TokenFailure) || err.kind !== 'refused') throw err
      const newer = again ? undefined : await this.#loadGrant(principal, grants)
      if (newer !== undefined && newer.sealed !== held.sealed) return await this.#renewFromStore(principal, grants, true)
      this.#refreshTokens.delete(principal)
      await grants.forget(principal, this.#upstream, held)
      throw new TokenFailure('refused', `the grant stored for work resumed without its caller was refused (it is deleted): ${err.message}`)
    }
  }

  async #loadGrant (principal: string, grants: GrantVault): Promise<HeldGrant | undefined> {
    try {
      return await grants.load(principal, this.#upstream)
    } catch {
      throw new TokenFailure('unavailable', 'the grant stored for work resumed without its caller cannot be read: the store is unavailable')
    }
  }

  #remember (principal: string, refreshToken: string): void {
    this.#refreshTokens.delete(principal)
    if (this.#refreshTokens.size >= this.#maxPrincipals) {
      const oldest = this.#refreshTokens.keys().next()
      if (oldest.done !== true) this.#refreshTokens.delete(oldest.value)
    }
    this.#refreshTokens.set(principal, refreshToken)
  }
}
