import type { Redis } from 'ioredis'
import type { Logger } from '../../observability/logger.ts'
import type { StoreHealth } from '../types.ts'
import type { StoreLoss } from '../data-loss.ts'
import { isOutOfMemory, unavailable } from './redis-errors.ts'

/** How long the key that readiness writes lives: it never outlasts a gateway that stopped asking. */
const PROBE_TTL_MS = 60_000
/** How often the eviction policy is read again besides each readiness check (a change is logged then). */
const POLICY_CHECK_MS = 60_000
const OOM_REASON = 'Redis refuses writes: it is out of memory (maxmemory reached with maxmemory-policy noeviction)'

/** When the store began refusing writes and why. */
interface Refusal {
  at: number
  reason: string
}

/**
 * What makes a Redis unfit beyond being unreachable, in one place. Writes refused (a Redis at `maxmemory`
 * under `noeviction` answers `OOM command not allowed`): recorded when any store operation or the readiness
 * probe (a small write with a TTL) meets it, logged once, and readiness answers not ready, naming the reason,
 * until a write succeeds again. A `maxmemory-policy` that evicts keys (anything but `noeviction`: Redis then
 * deletes stored tasks to make room, silently): read at start, with each readiness check and every minute,
 * logged as an error once per change and shown as a warning of the store in `/readyz`; the store stays ready
 * (it still answers), but acknowledged work may vanish until the policy is fixed.
 */
export class RedisHealth {
  readonly #redis: Redis
  readonly #probeKey: string
  readonly #log: Logger | undefined
  #refusal: Refusal | undefined
  /** The last policy read; undefined before the first read or where CONFIG is disabled. */
  #policy: string | undefined
  #timer: NodeJS.Timeout | undefined
  /** The store's latest loss while readiness still mentions it (see RedisEpoch). */
  readonly #recentLoss: () => StoreLoss | undefined

  constructor (redis: Redis, prefix: string, log?: Logger, recentLoss: () => StoreLoss | undefined = () => undefined) {
    this.#redis = redis
    this.#probeKey = `${prefix}readiness-probe`
    this.#log = log
    this.#recentLoss = recentLoss
  }

  /** Reads the eviction policy now and then every minute, until stop(). */
  async start (): Promise<void> {
    await this.checkPolicy()
    if (this.#timer !== undefined) return
    this.#timer = setInterval(() => { void this.checkPolicy() }, POLICY_CHECK_MS)
    this.#timer.unref()
  }

  stop (): void {
    clearInterval(this.#timer)
  }

  /** Told of every failed store operation: a refused write is recorded (the first one's time is kept). */
  failed (err: unknown): void {
    if (isOutOfMemory(err)) this.#refused(OOM_REASON)
  }

  #refused (reason: string): void {
    if (this.#refusal !== undefined) return
    this.#refusal = { at: Date.now(), reason }
    this.#log?.error({ reason }, 'The store refuses writes; tasks whose outcome cannot be stored stay unfinished until it accepts them again')
  }

  #accepted (): void {
    if (this.#refusal === undefined) return
    this.#log?.info({ refusedMs: Date.now() - this.#refusal.at }, 'The store accepts writes again')
    this.#refusal = undefined
  }

  /** The eviction policy, logged as an error when it evicts and it changed since the last read. */
  async checkPolicy (): Promise<string | undefined> {
    let policy: string | undefined
    try {
      const answer = await this.#redis.config('GET', 'maxmemory-policy') as string[]
      policy = answer[1]
    } catch {
      // CONFIG is disabled or renamed on many managed Redis: the policy cannot be known, which is not a fault.
      return this.#policy
    }
    if (policy !== undefined && policy !== this.#policy && evicts(policy)) {
      this.#log?.error({ maxmemoryPolicy: policy }, `Redis evicts keys (maxmemory-policy ${policy}): acknowledged tasks and sessions can vanish when it is full; set maxmemory-policy noeviction`)
    }
    this.#policy = policy
    return policy
  }

  /** Readiness: the store accepts a write, and any warning (an evicting policy). */
  async check (kind: string): Promise<StoreHealth> {
    const policy = await this.checkPolicy()
    const loss = this.#recentLoss()
    const warnings = [
      ...policy !== undefined && evicts(policy) ? [`maxmemory-policy ${policy} evicts keys: acknowledged tasks can be lost when Redis is full (set noeviction)`] : [],
      // A loss stays mentioned for a while: the store answers again, but what it held before is gone.
      ...loss !== undefined ? [`${loss.reason} at ${new Date(loss.at).toISOString()}; tasks and sessions stored before then are gone`] : [],
    ]
    const warning = warnings.length > 0 ? { warning: warnings.join('; ') } : {}
    try {
      await this.#redis.set(this.#probeKey, Date.now(), 'PX', PROBE_TTL_MS)
      this.#accepted()
      return { ok: true, kind, ...warning }
    } catch (err) {
      if (isOutOfMemory(err)) {
        this.#refused(OOM_REASON)
        const refusal = this.#refusal!
        return { ok: false, kind, detail: `${refusal.reason} (since ${new Date(refusal.at).toISOString()})`, ...warning }
      }
      // The gateway's own message, as for every store error; the backend's (which may name hosts) stays out.
      return { ok: false, kind, detail: unavailable(err).message, ...warning }
    }
  }
}

function evicts (policy: string): boolean {
  return policy !== 'noeviction'
}
