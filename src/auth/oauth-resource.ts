import type { FastifyInstance } from 'fastify'
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose'
import type { Config } from '../config/schema.ts'
import { GatewayError } from '../errors.ts'

export type OAuthConfig = NonNullable<Config['auth']['oauth']>

/** How long fetched signing keys are trusted before they are fetched again. */
const JWKS_MAX_AGE_MS = 10 * 60 * 1000
const JWKS_TIMEOUT_MS = 5000

/**
 * Where the protected resource metadata (RFC 9728) of `resource` is served: the well-known prefix is
 * inserted before the resource's path, so `https://gw.example/mcp` has
 * `https://gw.example/.well-known/oauth-protected-resource/mcp`.
 */
export function metadataUrl (resource: string): URL {
  const url = new URL(resource)
  const path = url.pathname === '/' ? '' : url.pathname
  return new URL(`/.well-known/oauth-protected-resource${path}`, url.origin)
}

/** The scopes of a token: the `scope` claim (space separated) or, as some issuers write it, `scp`. */
function scopesOf (payload: JWTPayload): Set<string> {
  const raw = payload.scope ?? payload.scp
  if (typeof raw === 'string') return new Set(raw.split(' ').filter((s) => s !== ''))
  if (Array.isArray(raw)) return new Set(raw.filter((s): s is string => typeof s === 'string'))
  return new Set()
}

/**
 * An OAuth 2.1 resource server: verifies JWT access tokens against the issuer's published keys (cached,
 * and fetched again when a token names a key id not seen yet, which is how issuers rotate keys), checks
 * `iss`, `aud`, `exp` and `nbf`, the required scopes, and names the principal by a claim.
 */
export class OAuthResource {
  readonly #config: OAuthConfig
  readonly #keys: JWTVerifyGetKey
  readonly #audience: string[]

  constructor (config: OAuthConfig) {
    this.#config = config
    const remote = createRemoteJWKSet(new URL(config.jwksUri), { cacheMaxAge: JWKS_MAX_AGE_MS, cooldownDuration: config.jwksCooldown, timeoutDuration: JWKS_TIMEOUT_MS })
    // Key lookup fails either because of the token (no key with its id) or because the JWKS could not be
    // fetched or read (network, status, timeout, bad document): only the first is the client's fault.
    this.#keys = async (header, token) => {
      try {
        return await remote(header, token)
      } catch (err) {
        if (err instanceof joseErrors.JWKSNoMatchingKey || err instanceof joseErrors.JWKSMultipleMatchingKeys) throw err
        throw new GatewayError('GW_ERR_AUTH_UNAVAILABLE', [err instanceof Error ? err.message : 'unexpected failure'], { cause: err })
      }
    }
    this.#audience = config.audience ?? [config.resource]
  }

  /** The principal a valid token names and the scopes it carries; GW_ERR_AUTH_* otherwise. */
  async verify (token: string): Promise<{ principal: string, scopes: string[] }> {
    let payload: JWTPayload
    try {
      ({ payload } = await jwtVerify(token, this.#keys, {
        issuer: this.#config.issuer,
        audience: this.#audience,
        clockTolerance: Math.floor(this.#config.clockTolerance / 1000),
      }))
    } catch (err) {
      if (err instanceof joseErrors.JWTExpired || (err instanceof joseErrors.JWTClaimValidationFailed && err.claim === 'nbf')) {
        throw new GatewayError('GW_ERR_AUTH_EXPIRED', [], { cause: err })
      }
      if (err instanceof GatewayError) throw err
      throw new GatewayError('GW_ERR_AUTH_INVALID', [], { cause: err })
    }
    const granted = scopesOf(payload)
    const missing = this.#config.requiredScopes.find((scope) => !granted.has(scope))
    if (missing !== undefined) throw new GatewayError('GW_ERR_AUTH_SCOPE', [missing])
    const principal = payload[this.#config.principalClaim]
    if (typeof principal !== 'string' || principal === '') throw new GatewayError('GW_ERR_AUTH_INVALID')
    return { principal, scopes: [...granted] }
  }

  /** The `WWW-Authenticate` parameter that points clients at the metadata (MCP authorization spec). */
  get resourceMetadataUrl (): string {
    return metadataUrl(this.#config.resource).href
  }

  /** Serves the protected resource metadata at its RFC 9728 location (and at the bare well-known path). */
  register (app: FastifyInstance): void {
    const document = {
      resource: this.#config.resource,
      authorization_servers: [this.#config.issuer],
      bearer_methods_supported: ['header'],
      ...(this.#config.scopesSupported.length > 0 && { scopes_supported: this.#config.scopesSupported }),
    }
    const paths = new Set([metadataUrl(this.#config.resource).pathname, '/.well-known/oauth-protected-resource'])
    for (const path of paths) app.get(path, async (_request, reply) => await reply.header('cache-control', 'max-age=300').send(document))
  }
}
