import type { FastifyInstance } from 'fastify'
import { decodeProtectedHeader, errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyResult } from 'jose'
import type { Config } from '../config/schema.ts'
import { GatewayError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import { JwksCache } from './jwks-cache.ts'

export type OAuthConfig = NonNullable<Config['auth']['oauth']>

/** How long fetched signing keys are trusted before they are fetched again. */
const JWKS_MAX_AGE_MS = 10 * 60 * 1000
const JWKS_TIMEOUT_MS = 5000

/**
 * Principals named by access tokens carry this prefix, so that no subject of the identity provider can
 * take the name of a static-token principal (whose names stay as configured and may not start with it).
 */
export const OAUTH_PRINCIPAL_PREFIX = 'oauth:'

/** The `typ` values of an RFC 9068 access token (compared in lower case, `application/` stripped). */
const ACCESS_TOKEN_TYP = 'at+jwt'

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
 * A value from the token, as an error message may quote it: the message becomes the challenge's
 * `error_description`, so only characters a quoted header parameter carries as they are stay, others become `?`.
 */
function quoted (value: string): string {
  return value.slice(0, 32).replace(/[^A-Za-z0-9+/._-]/g, '?')
}

function normalizedTyp (typ: string | undefined): string | undefined {
  return typ?.toLowerCase().replace(/^application\//, '')
}

/** The `alg` a token's header names, for an error message (undefined when the header cannot be read). */
function algOf (token: string): string | undefined {
  try {
    const { alg } = decodeProtectedHeader(token)
    return typeof alg === 'string' ? quoted(alg) : undefined
  } catch {
    return undefined
  }
}

/**
 * An OAuth 2.1 resource server: verifies JWT access tokens against the issuer's published keys (see
 * JwksCache), with an algorithm allow-list, checks `iss`, `aud`, `exp` (required) and `nbf`, the `typ`
 * header, the principal claim and the required scopes, and names the principal `oauth:<claim value>`.
 */
export class OAuthResource {
  readonly #config: OAuthConfig
  readonly #keys: JwksCache
  readonly #audience: string[]

  constructor (config: OAuthConfig, log: Logger) {
    this.#config = config
    this.#keys = new JwksCache({
      uri: new URL(config.jwksUri),
      maxAgeMs: JWKS_MAX_AGE_MS,
      cooldownMs: config.jwksCooldown,
      timeoutMs: JWKS_TIMEOUT_MS,
      log,
    })
    this.#audience = config.audience ?? [config.resource]
  }

  /** The principal a valid token names, the scopes it carries and when it expires (ms); GW_ERR_AUTH_* otherwise. */
  async verify (token: string): Promise<{ principal: string, scopes: string[], expiresAt: number }> {
    const { payload, protectedHeader } = await this.#verified(token)
    const typ = normalizedTyp(protectedHeader.typ)
    if (this.#config.requireTyp ? typ !== ACCESS_TOKEN_TYP : typ !== undefined && typ !== ACCESS_TOKEN_TYP && typ !== 'jwt') {
      throw new GatewayError('GW_ERR_AUTH_REJECTED', [`its typ ${protectedHeader.typ === undefined ? '(none)' : quoted(protectedHeader.typ)} is not at+jwt${this.#config.requireTyp ? '' : ' or JWT'}`])
    }
    // Who comes before what: a token that names nobody is invalid whatever scopes it has.
    const principal = payload[this.#config.principalClaim]
    if (typeof principal !== 'string' || principal === '') {
      throw new GatewayError('GW_ERR_AUTH_REJECTED', [`it has no ${this.#config.principalClaim} claim naming the caller`])
    }
    const granted = scopesOf(payload)
    const missing = this.#config.requiredScopes.find((scope) => !granted.has(scope))
    if (missing !== undefined) throw new GatewayError('GW_ERR_AUTH_SCOPE', [missing])
    // `exp` is required (see #verified); the clock tolerance that let the token in also keeps it.
    const expiresAt = (payload.exp ?? 0) * 1000 + this.#config.clockTolerance
    return { principal: `${OAUTH_PRINCIPAL_PREFIX}${principal}`, scopes: [...granted], expiresAt }
  }

  /** The token's payload and header once its signature and claims hold; GW_ERR_AUTH_* otherwise. */
  async #verified (token: string): Promise<JWTVerifyResult> {
    try {
      return await jwtVerify(token, this.#keys.getKey, {
        issuer: this.#config.issuer,
        audience: this.#audience,
        algorithms: this.#config.algorithms,
        requiredClaims: ['exp'],
        clockTolerance: Math.floor(this.#config.clockTolerance / 1000),
      })
    } catch (err) {
      if (err instanceof GatewayError) throw err
      if (err instanceof joseErrors.JWTExpired || (err instanceof joseErrors.JWTClaimValidationFailed && err.claim === 'nbf' && err.reason === 'check_failed')) {
        throw new GatewayError('GW_ERR_AUTH_EXPIRED', [], { cause: err })
      }
      if (err instanceof joseErrors.JWTClaimValidationFailed && err.claim === 'exp' && err.reason === 'missing') {
        throw new GatewayError('GW_ERR_AUTH_REJECTED', ['it has no exp claim; access tokens must expire'], { cause: err })
      }
      if (err instanceof joseErrors.JOSEAlgNotAllowed) {
        throw new GatewayError('GW_ERR_AUTH_REJECTED', [`its alg ${algOf(token) ?? '(unreadable)'} is not one of ${this.#config.algorithms.join(', ')}`], { cause: err })
      }
      throw new GatewayError('GW_ERR_AUTH_INVALID', [], { cause: err })
    }
  }

  /** The `scope` parameter of challenges (MCP authorization): the scopes every token needs, if any. */
  get challengeScope (): string | undefined {
    return this.#config.requiredScopes.length === 0 ? undefined : this.#config.requiredScopes.join(' ')
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
