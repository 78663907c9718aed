/**
 * Finds the authorization server of an upstream and the resource to ask tokens for, as the MCP authorization
 * spec says: the upstream's 401 names its protected resource metadata (`WWW-Authenticate: Bearer
 * resource_metadata="…"`, RFC 9728), else the well-known URLs are tried (path-aware, then the root); that
 * metadata's `resource` must cover the upstream's URL, and it names the authorization server, whose metadata
 * (RFC 8414, then OpenID Connect discovery) must carry the same `issuer`. An operator who configured the issuer
 * or the token endpoint skips the steps that are known.
 *
 * The SDK's discovery functions do the fetching and the issuer check (they follow the spec's order of URLs);
 * this class adds the resource check, the first probe, timeouts and one discovery however many callers wait.
 */
import {
  checkResourceAllowed,
  discoverAuthorizationServerMetadata,
  discoverOAuthProtectedResourceMetadata,
  extractWWWAuthenticateParams,
  IssuerMismatchError,
  type FetchLike,
} from '@modelcontextprotocol/client'
import type * as oauth from 'oauth4webapi'
import { errorMessage } from '../../../errors.ts'
import type { OAuthCredentialsOptions } from './oauth-options.ts'
import { networkReason, TokenFailure, withoutSecrets } from './token-failure.ts'

export interface DiscoveredServer {
  /** The authorization server's metadata (at least its issuer and token endpoint). */
  readonly server: oauth.AuthorizationServer
  /** The resource indicator tokens are asked for (RFC 8707). */
  readonly resource: string
}

/** The `resource_metadata` URL of a WWW-Authenticate header, if it names one. */
export function resourceMetadataOf (wwwAuthenticate: string | undefined): string | undefined {
  if (wwwAuthenticate === undefined || wwwAuthenticate === '') return undefined
  const params = extractWWWAuthenticateParams(new Response(null, { status: 401, headers: { 'www-authenticate': wwwAuthenticate } }))
  return params.resourceMetadataUrl?.href
}

/** A fetch that gives up after `timeoutMs`, or earlier when the caller's signal aborts. */
export function fetchWithTimeout (timeoutMs: number): FetchLike {
  return async (url, init) => {
    const timeout = AbortSignal.timeout(timeoutMs)
    const signal = init?.signal == null ? timeout : AbortSignal.any([init.signal, timeout])
    return await fetch(url, { ...init, signal, redirect: 'manual' })
  }
}

/** Where RFC 9728 (and the MCP spec's fallback) look for an upstream's metadata: under its path, then at the root. */
export function wellKnownMetadataUrls (url: string): string[] {
  const { origin, pathname } = new URL(url)
  const root = `${origin}/.well-known/oauth-protected-resource`
  return pathname === '/' ? [root] : [`${root}${pathname.replace(/\/$/, '')}`, root]
}

export class AuthorizationServerDiscovery {
  readonly #options: OAuthCredentialsOptions
  readonly #fetch: FetchLike
  readonly #timeoutMs: number
  #found: Promise<DiscoveredServer> | undefined
  /** The protected resource metadata URL an upstream's 401 named, to be used by the next discovery. */
  #hint: string | undefined
  /** The metadata URLs the current discovery read or tried: a 401 naming one of them teaches nothing new. */
  #used: readonly string[] = []

  constructor (options: OAuthCredentialsOptions, timeoutMs: number) {
    this.#options = options
    this.#timeoutMs = timeoutMs
    this.#fetch = fetchWithTimeout(timeoutMs)
  }

  /** The server and resource: found once, then kept until `learn` hears of other metadata; a failure is not kept. */
  async discover (): Promise<DiscoveredServer> {
    if (this.#found === undefined) {
      const found = this.#discoverOnce()
      this.#found = found
      found.catch(() => { if (this.#found === found) this.#found = undefined })
    }
    return await this.#found
  }

  /**
   * An upstream's 401 came with `wwwAuthenticate`: when it names protected resource metadata other than the
   * discovery used, discovery starts over from it (the server or resource may have moved). Returns whether it
   * does. With a configured issuer or token endpoint, nothing is learnt.
   */
  learn (wwwAuthenticate: string | undefined): boolean {
    if (this.#options.issuer !== undefined || this.#options.tokenEndpoint !== undefined) return false
    const hint = resourceMetadataOf(wwwAuthenticate)
    if (hint === undefined || hint === this.#hint || this.#used.includes(hint)) return false
    this.#hint = hint
    this.#found = undefined
    return true
  }

  async #discoverOnce (): Promise<DiscoveredServer> {
    const { tokenEndpoint, issuer, resource, url } = this.#options
    if (tokenEndpoint !== undefined) {
      return { server: { issuer: issuer ?? new URL(tokenEndpoint).origin, token_endpoint: tokenEndpoint }, resource: resource ?? url }
    }
    if (issuer !== undefined) return { server: await this.#serverMetadata(issuer), resource: resource ?? url }
    const hint = this.#hint ?? await this.#probe()
    this.#used = hint === undefined ? wellKnownMetadataUrls(url) : [hint]
    const metadata = await this.#guard('its protected resource metadata', async () =>
      await discoverOAuthProtectedResourceMetadata(url, hint === undefined ? {} : { resourceMetadataUrl: hint }, this.#fetch))
    if (!checkResourceAllowed({ requestedResource: url, configuredResource: metadata.resource })) {
      throw new TokenFailure('discovery', `its protected resource metadata is for resource '${metadata.resource}', which does not cover '${url}'`)
    }
    const servers = metadata.authorization_servers ?? []
    const chosen = servers[0]
    if (chosen === undefined) throw new TokenFailure('discovery', 'its protected resource metadata names no authorization server')
    return { server: await this.#serverMetadata(chosen), resource: resource ?? metadata.resource }
  }

  async #serverMetadata (issuer: string): Promise<oauth.AuthorizationServer> {
    const metadata = await this.#guard(`the metadata of authorization server '${issuer}'`, async () =>
      await discoverAuthorizationServerMetadata(issuer, { fetchFn: this.#fetch }))
    if (metadata === undefined) throw new TokenFailure('discovery', `authorization server '${issuer}' publishes no metadata (RFC 8414 or OpenID Connect discovery)`)
    if (metadata.token_endpoint === undefined) throw new TokenFailure('discovery', `authorization server '${issuer}' names no token endpoint`)
    return metadata as oauth.AuthorizationServer
  }

  /**
   * Asks the upstream without credentials, to read the `resource_metadata` of its 401 (an MCP server that
   * requires authorization answers any request without a token so). Any other answer: no hint.
   */
  async #probe (): Promise<string | undefined> {
    try {
      const res = await this.#fetch(this.#options.url, { method: 'GET', headers: { accept: 'text/event-stream' } })
      await res.body?.cancel()
      return res.status === 401 ? resourceMetadataOf(res.headers.get('www-authenticate') ?? undefined) : undefined
    } catch (err) {
      throw new TokenFailure('unavailable', `the upstream cannot be asked how to authorize: ${networkReason(err, this.#timeoutMs)}`)
    }
  }

  async #guard<T> (what: string, fetchIt: () => Promise<T>): Promise<T> {
    try {
      return await fetchIt()
    } catch (err) {
      if (err instanceof TokenFailure) throw err
      if (err instanceof IssuerMismatchError) throw new TokenFailure('discovery', `${what} names another issuer: ${withoutSecrets(errorMessage(err), [])}`)
      if (err instanceof Error && (err.name === 'TimeoutError' || (err instanceof TypeError && err.message === 'fetch failed'))) {
        throw new TokenFailure('unavailable', `${what} cannot be fetched: ${networkReason(err, this.#timeoutMs)}`)
      }
      throw new TokenFailure('discovery', `${what} cannot be used: ${withoutSecrets(errorMessage(err), [])}`)
    }
  }
}
