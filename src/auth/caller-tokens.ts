/**
 * The callers' own OAuth access tokens (auth.oauth), kept in this process's memory for upstreams whose
 * credentials exchange them for a token made for the upstream (RFC 8693, `credentials.grant: token_exchange`).
 * The authenticator notes each token it validated, under its principal; the upstream's credentials read the
 * principal's latest one when they need to exchange (a cached exchanged token needs none). A token is kept until
 * its `exp`, never written anywhere: not to the store, the log, the metrics, the peer channel or an error; only
 * the token exchange request to the authorization server carries it. Work resumed without its caller (another
 * process, a restart) finds none here, as it should: it is served from what the exchange left to renew with.
 */

interface Held {
  readonly token: string
  readonly expiresAt: number
}

export class CallerTokens {
  readonly #tokens = new Map<string, Held>()
  readonly #max: number
  readonly #now: () => number

  /** `max`: principals whose token is kept at most (the least recently authenticated go first). */
  constructor (max = 10_000, now: () => number = Date.now) {
    this.#max = max
    this.#now = now
  }

  /** `principal` authenticated with `token`, valid until `expiresAt` (ms since the epoch). */
  note (principal: string, token: string, expiresAt: number): void {
    const held = this.#tokens.get(principal)
    if (held !== undefined && held.token === token) return
    this.#tokens.delete(principal)
    if (this.#tokens.size >= this.#max) {
      const oldest = this.#tokens.keys().next()
      if (oldest.done !== true) this.#tokens.delete(oldest.value)
    }
    this.#tokens.set(principal, { token, expiresAt })
  }

  /** The latest token `principal` authenticated with, while it is valid; undefined after its `exp` or when none was seen. */
  tokenOf (principal: string): string | undefined {
    const held = this.#tokens.get(principal)
    if (held === undefined) return undefined
    if (held.expiresAt <= this.#now()) {
      this.#tokens.delete(principal)
      return undefined
    }
    return held.token
  }

  /** Principals with a token kept. */
  get size (): number {
    return this.#tokens.size
  }

  /** Forgets every token (the gateway closes). */
  clear (): void {
    this.#tokens.clear()
  }

  /** Never its tokens in a log line or an inspection. */
  toJSON (): string {
    return `CallerTokens(${this.#tokens.size})`
  }
}

/**
 * Whom a caller's upstream session makes its requests for (a CredentialSubject): its principal and, read per
 * request, that principal's latest token. A class, so that the token is a getter of its prototype: serialising
 * or inspecting a subject shows the principal only.
 */
export class CallerSubject {
  readonly principal: string
  readonly #tokens: CallerTokens

  constructor (principal: string, tokens: CallerTokens) {
    this.principal = principal
    this.#tokens = tokens
  }

  get subjectToken (): string | undefined {
    return this.#tokens.tokenOf(this.principal)
  }
}
