/**
 * Access tokens by key (the gateway's own for client credentials; one per principal and caller token for a
 * token exchange), with the three rules that keep an authorization server calm:
 *
 * - a token is used until shortly before it expires (`refreshSkewMs`, at most half its lifetime);
 * - one request obtains it however many callers wait (single flight), and no caller's abort stops it for others;
 * - a failed request is remembered per key with a backoff (1 s, doubling to 30 s): callers in that time get the
 *   same error at once, with Retry-After, and the server sees one request, not one per call.
 *
 * Keys are opaque strings made by the caller (hashes, never a token). The least recently used keys go when
 * there are more than `maxEntries`.
 */
import type { GatewayError } from '../../../errors.ts'
import type { ResolvedTimings } from './oauth-options.ts'
import { TokenFailure, toGatewayError } from './token-failure.ts'

export interface ObtainedToken {
  readonly accessToken: string
  /** When it expires (ms on the cache's clock); undefined: the server did not say, used until rejected. */
  readonly expiresAt: number | undefined
  /** Set by a grant that returned one (kept in memory to renew without the caller, see token exchange). */
  readonly refreshToken?: string | undefined
  /** The issuer of the authorization server that gave it (a refresh token goes back to that server only). */
  readonly issuer?: string | undefined
}

/** Gets a new token; `previous` is the one it replaces (for its refresh token). */
export type Obtain = (previous: ObtainedToken | undefined) => Promise<ObtainedToken>

interface Entry {
  token?: ObtainedToken | undefined
  /** When the token is renewed (its expiry less the skew); -Infinity once the upstream rejected it. */
  renewAt?: number | undefined
  pending?: Promise<ObtainedToken> | undefined
  failure?: { failure: TokenFailure, until: number, backoffMs: number } | undefined
  /** The upstream rejected the token, and whether asking for a new one is worth a retry. */
  rejected?: { retry: boolean } | undefined
  /** The token was obtained to replace one the upstream rejected. */
  afterRejection?: boolean
}

export class TokenCache {
  readonly #upstream: string
  readonly #timings: ResolvedTimings
  readonly #entries = new Map<string, Entry>()

  constructor (upstream: string, timings: ResolvedTimings) {
    this.#upstream = upstream
    this.#timings = timings
  }

  get size (): number {
    return this.#entries.size
  }

  /**
   * The token under `key`: the cached one while fresh, else the one `obtain` gets (which sees the token it
   * replaces, for its refresh token). Rejects with the GatewayError of the last failure while its backoff runs.
   */
  async get (key: string, obtain: Obtain, signal?: AbortSignal): Promise<ObtainedToken> {
    signal?.throwIfAborted()
    const entry = this.#touch(key)
    const now = this.#timings.now()
    if (entry.token !== undefined && (entry.renewAt === undefined || now < entry.renewAt)) return entry.token
    if (entry.pending === undefined) {
      if (entry.failure !== undefined && now < entry.failure.until) throw this.#errorOf(entry.failure.failure, entry.failure.until - now)
      entry.pending = this.#start(key, entry, obtain)
    }
    return await abortable(entry.pending, signal)
  }

  /** The token under `key` without obtaining one (fresh or not). */
  peek (key: string): ObtainedToken | undefined {
    return this.#entries.get(key)?.token
  }

  /**
   * The upstream rejected `accessToken`: it is dropped if it is still the one under `key`. Returns false when
   * the rejected token had itself replaced a rejected one (a new one is unlikely to fare better), else true.
   */
  drop (key: string, accessToken: string): boolean {
    const entry = this.#entries.get(key)
    if (entry?.token === undefined || entry.token.accessToken !== accessToken) return true
    if (entry.rejected === undefined) {
      entry.rejected = { retry: entry.afterRejection !== true }
      entry.renewAt = -Infinity
    }
    return entry.rejected.retry
  }

  delete (key: string): void {
    this.#entries.delete(key)
  }

  clear (): void {
    this.#entries.clear()
  }

  #touch (key: string): Entry {
    let entry = this.#entries.get(key)
    if (entry === undefined) {
      entry = {}
      if (this.#entries.size >= this.#timings.maxCachedTokens) this.#evict()
    } else {
      this.#entries.delete(key)
    }
    this.#entries.set(key, entry)
    return entry
  }

  /** Makes room: the least recently used entry that has no request in flight. */
  #evict (): void {
    for (const [key, entry] of this.#entries) {
      if (entry.pending === undefined) {
        this.#entries.delete(key)
        return
      }
    }
  }

  async #start (key: string, entry: Entry, obtain: Obtain): Promise<ObtainedToken> {
    try {
      const token = await obtain(entry.token)
      const now = this.#timings.now()
      entry.token = token
      entry.renewAt = token.expiresAt === undefined
        ? undefined
        : token.expiresAt - Math.min(this.#timings.refreshSkewMs, Math.max(0, (token.expiresAt - now) / 2))
      entry.failure = undefined
      entry.afterRejection = entry.rejected !== undefined
      entry.rejected = undefined
      return token
    } catch (err) {
      const failure = err instanceof TokenFailure ? err : new TokenFailure('unavailable', 'the token request failed')
      const backoffMs = entry.failure === undefined
        ? this.#timings.initialBackoffMs
        : Math.min(entry.failure.backoffMs * 2, this.#timings.maxBackoffMs)
      entry.failure = { failure, until: this.#timings.now() + backoffMs, backoffMs }
      if (failure.kind === 'missing') entry.failure.until = 0
      throw this.#errorOf(failure, backoffMs)
    } finally {
      entry.pending = undefined
      if (this.#entries.get(key) !== entry) this.#entries.delete(key)
    }
  }

  #errorOf (failure: TokenFailure, waitMs: number): GatewayError {
    return toGatewayError(this.#upstream, failure, Math.max(1, Math.ceil(waitMs / 1000)))
  }
}

/** `promise`, or the signal's reason as soon as `signal` aborts (the promise itself goes on for the others). */
async function abortable<T> (promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return await promise
  signal.throwIfAborted()
  let onAbort: (() => void) | undefined
  const aborted = new Promise<never>((_resolve, reject) => {
    onAbort = () => { reject(signal.reason) }
    signal.addEventListener('abort', onAbort, { once: true })
  })
  try {
    return await Promise.race([promise, aborted])
  } finally {
    signal.removeEventListener('abort', onAbort!)
  }
}
