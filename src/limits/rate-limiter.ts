import { createHash } from 'node:crypto'
import type { LimitsConfig } from '../config/schema.ts'
import { GatewayError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import type { RateLimitStore } from '../store/types.ts'
import { retryAfterSeconds, type BucketLimit } from '../store/token-bucket.ts'
import type { ClassifiedMessage } from '../wire/classified-message.ts'

/** Least time between two warnings that limits are not enforced (the store being unavailable). */
const WARN_EVERY_MS = 10_000

/** A 429: the request was refused by a token bucket. `retryAfter` (whole seconds) goes out as Retry-After. */
export class RateLimitError extends GatewayError {
  override readonly retryAfter: number
  /** The option of the limit that refused the request (`limits.<limit>`). */
  readonly limit: string

  constructor (code: 'GW_ERR_RATE_LIMITED' | 'GW_ERR_POLL_TOO_FAST', args: readonly unknown[], retryAfter: number) {
    super(code, args)
    this.retryAfter = retryAfter
    this.limit = code === 'GW_ERR_POLL_TOO_FAST' ? 'pollBurst' : String(args[1])
  }
}

export interface RateLimiterOptions {
  limits: LimitsConfig
  /** tasks.pollInterval (ms): polls of one task refill at one per interval, limits.pollBurst ahead. */
  pollIntervalMs: number
  store: RateLimitStore
  log: Logger
}

/** A bucket key of bounded size whatever the identity (addresses from headers, principal names, task ids). */
function digest (identity: string): string {
  return createHash('sha256').update(identity).digest('base64url').slice(0, 22)
}

function refused (what: string, option: string, waitMs: number): RateLimitError {
  const seconds = retryAfterSeconds(waitMs)
  return new RateLimitError('GW_ERR_RATE_LIMITED', [what, option, seconds], seconds)
}

/**
 * The request rate limits (`limits.requestsPerIp`, `requestsPerPrincipal`, `taskOpsPerPrincipal`,
 * `pollBurst`): token buckets in the store's RateLimitStore, so on a shared store (Redis, PostgreSQL) every
 * gateway process draws from the same buckets. Built only when at least one limit is on: with all off the
 * route pays a null check.
 *
 * When the store fails (Redis or PostgreSQL unreachable or not answering), limits fail open: the request goes
 * on unlimited, and a warning is logged at most every 10 s. A rate check is never the reason a request fails;
 * when the request itself needs the store it fails there, with GW_ERR_STORE_UNAVAILABLE and its Retry-After.
 * The wait is bounded by the store's own timeouts (5 s for a Redis command, store.acquireTimeout for a
 * PostgreSQL connection), which every other store call of the request has too; an unreachable Redis refuses
 * at once (no offline queue).
 */
export class RateLimiter {
  readonly #store: RateLimitStore
  readonly #log: Logger
  readonly #perIp: BucketLimit | undefined
  readonly #perPrincipal: BucketLimit | undefined
  readonly #taskOps: BucketLimit | undefined
  readonly #poll: BucketLimit | undefined
  readonly #pollIntervalMs: number
  #warnedAt = -Infinity
  #unenforced = 0

  constructor (options: RateLimiterOptions) {
    const { limits } = options
    this.#store = options.store
    this.#log = options.log
    this.#perIp = limits.requestsPerIp
    this.#perPrincipal = limits.requestsPerPrincipal
    this.#taskOps = limits.taskOpsPerPrincipal
    this.#pollIntervalMs = options.pollIntervalMs
    // A pollInterval of 0 suggests polling at will: nothing to hold polls to.
    this.#poll = limits.pollBurst === undefined || options.pollIntervalMs <= 0
      ? undefined
      : { rate: 1000 / options.pollIntervalMs, burst: limits.pollBurst }
  }

  /**
   * limits.requestsPerIp, checked before authentication. `address` is the client's (server.trustProxy
   * applied); undefined when its socket is already gone (such requests share one bucket).
   */
  async checkAddress (address: string | undefined): Promise<void> {
    if (this.#perIp === undefined) return
    const wait = await this.#take(`ip:${digest(address ?? '')}`, this.#perIp)
    if (wait > 0) throw refused('too many requests from this address', 'requestsPerIp', wait)
  }

  /**
   * The limits after authentication. `principal` is undefined when auth is off: requestsPerPrincipal is
   * then skipped, and task operations and polls are counted per client address instead. `message` is the
   * POSTed message as the route classified it (undefined for GET and DELETE): its task operations count
   * against taskOpsPerPrincipal (see ClassifiedRequest.taskOperation), and its tasks/get against pollBurst.
   */
  async checkCaller (principal: string | undefined, address: string | undefined, message: ClassifiedMessage | undefined): Promise<void> {
    if (this.#perPrincipal !== undefined && principal !== undefined) {
      const wait = await this.#take(`principal:${digest(principal)}`, this.#perPrincipal)
      if (wait > 0) throw refused('too many requests for this principal', 'requestsPerPrincipal', wait)
    }
    if (this.#taskOps === undefined && this.#poll === undefined) return
    if (message?.kind !== 'request' || !message.taskOperation) return
    const who = principal === undefined ? `address ${address ?? ''}` : `principal ${principal}`
    if (this.#taskOps !== undefined) {
      const wait = await this.#take(`task-ops:${digest(who)}`, this.#taskOps)
      if (wait > 0) throw refused('too many task operations', 'taskOpsPerPrincipal', wait)
    }
    const { taskId } = message
    if (this.#poll !== undefined && message.method === 'tasks/get' && taskId !== undefined) {
      const wait = await this.#take(`poll:${digest(JSON.stringify([who, taskId]))}`, this.#poll)
      if (wait > 0) {
        const seconds = retryAfterSeconds(wait)
        throw new RateLimitError('GW_ERR_POLL_TOO_FAST', [taskId, this.#pollIntervalMs, seconds], seconds)
      }
    }
  }

  /** One token from a bucket: 0 when taken (or when the store failed: fail open), else the ms to wait. */
  async #take (key: string, limit: BucketLimit): Promise<number> {
    try {
      return await this.#store.take(key, limit.rate, limit.burst)
    } catch (err) {
      this.#unenforced++
      const now = Date.now()
      if (now - this.#warnedAt >= WARN_EVERY_MS) {
        this.#log.warn({ err, unenforced: this.#unenforced }, 'rate limits not enforced: the store is unavailable')
        this.#warnedAt = now
        this.#unenforced = 0
      }
      return 0
    }
  }
}

/** The limiter for `limits`, or undefined when every rate limit is off (the route then checks nothing). */
export function createRateLimiter (options: RateLimiterOptions): RateLimiter | undefined {
  const { requestsPerIp, requestsPerPrincipal, taskOpsPerPrincipal, pollBurst } = options.limits
  const everyLimitOff = requestsPerIp === undefined && requestsPerPrincipal === undefined &&
    taskOpsPerPrincipal === undefined && pollBurst === undefined
  if (everyLimitOff) return undefined
  return new RateLimiter(options)
}
