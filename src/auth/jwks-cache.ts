import { createLocalJWKSet, errors as joseErrors, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose'
import { GatewayError, errorMessage } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'

export interface JwksCacheOptions {
  uri: URL
  /** How long fetched keys are used before they are fetched again. */
  maxAgeMs: number
  /** Least time between two fetches, whether the last one succeeded or failed. */
  cooldownMs: number
  /** How long one fetch may take. */
  timeoutMs: number
  log: Logger
}

/**
 * The issuer's signing keys (a JWKS), fetched on first use, again once they are `maxAgeMs` old, and again
 * when a token names a key id not among them (how issuers rotate keys). Every fetch counts against the
 * cooldown, a failed one too, so neither tokens with made-up key ids nor a failing issuer make the gateway
 * ask the issuer more than once per `cooldownMs`; concurrent requests share one fetch.
 *
 * While fetches fail, the keys of the last good fetch stay in use. With none, and for a key id not among
 * them, verification fails with GW_ERR_AUTH_UNAVAILABLE (whose cause is the fetch's failure) until a fetch
 * succeeds. Each failed fetch is logged once, with its cause. Faults of the token itself (a key id that is
 * not published, an algorithm no published key has) are jose's own errors, for the caller to map.
 */
/** A fetch failure in words: fetch's own `fetch failed` says nothing without the code of its cause. */
function describe (err: unknown): string {
  const cause = err instanceof Error ? err.cause as { code?: unknown, message?: unknown } | undefined : undefined
  const detail = typeof cause?.code === 'string' ? cause.code : typeof cause?.message === 'string' ? cause.message : undefined
  return detail === undefined ? errorMessage(err) : `${errorMessage(err)} (${detail})`
}

export class JwksCache {
  readonly #options: JwksCacheOptions
  #keys: JWTVerifyGetKey | undefined
  #fetchedAt = Number.NEGATIVE_INFINITY
  #attemptedAt = Number.NEGATIVE_INFINITY
  /** The last fetch's failure, until a fetch succeeds. */
  #failure: GatewayError | undefined
  #pending: Promise<void> | undefined

  constructor (options: JwksCacheOptions) {
    this.#options = options
  }

  /** The key that verifies a token with this protected header, for jose's jwtVerify. */
  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    const attempted = this.#attemptedAt
    if (this.#keys === undefined || performance.now() - this.#fetchedAt >= this.#options.maxAgeMs) await this.#refresh()
    if (this.#keys === undefined) throw this.#failure ?? new GatewayError('GW_ERR_AUTH_UNAVAILABLE', ['no keys fetched yet'])
    try {
      return await this.#keys(header, token)
    } catch (err) {
      if (!(err instanceof joseErrors.JWKSNoMatchingKey)) throw err
      // A key id not seen yet: the issuer may have rotated its keys since the last fetch (unless that fetch
      // was made for this very token).
      if (this.#attemptedAt === attempted) await this.#refresh()
      if (this.#failure !== undefined) throw this.#failure
      return await this.#keys(header, token)
    }
  }

  /** Fetches the keys unless a fetch is under way (then waits for it) or the cooldown has not passed. */
  async #refresh (): Promise<void> {
    if (this.#pending !== undefined) {
      await this.#pending
      return
    }
    if (performance.now() - this.#attemptedAt < this.#options.cooldownMs) return
    this.#attemptedAt = performance.now()
    this.#pending = this.#fetch().finally(() => { this.#pending = undefined })
    await this.#pending
  }

  async #fetch (): Promise<void> {
    const { uri, timeoutMs, cooldownMs, log } = this.#options
    try {
      const res = await fetch(uri, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(timeoutMs) })
      if (res.status !== 200) {
        await res.body?.cancel()
        throw new Error(`the JWKS endpoint answered HTTP ${res.status}`)
      }
      const document = await res.json() as JSONWebKeySet
      this.#keys = createLocalJWKSet(document)
      this.#fetchedAt = performance.now()
      this.#failure = undefined
    } catch (err) {
      const reason = err instanceof joseErrors.JWKSInvalid ? 'the JWKS endpoint answered a document that is not a JSON Web Key Set' : describe(err)
      this.#failure = new GatewayError('GW_ERR_AUTH_UNAVAILABLE', [reason], { cause: err })
      log.warn({ err, jwksUri: uri.href, retryAfterMs: cooldownMs, keptKeys: this.#keys !== undefined }, 'could not fetch the issuer\'s signing keys')
    }
  }
}
