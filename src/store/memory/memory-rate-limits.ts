import type { RateLimitStore } from '../types.ts'
import { msUntilFull, take, type Bucket } from '../token-bucket.ts'

/** Buckets held at once by default (about 150 bytes each). */
export const DEFAULT_MAX_BUCKETS = 100_000

export interface MemoryRateLimitsOptions {
  /** The clock (epoch ms); Date.now by default. */
  now?: () => number
  /** Most buckets held at once. */
  maxBuckets?: number
}

interface HeldBucket extends Bucket {
  /** When the bucket is full again (epoch ms): from then on it equals a bucket never used. */
  fullAt: number
}

/**
 * Token buckets in a Map, for the stores that serve one process (memory, SQLite). Buckets refill lazily
 * when used; none is written when a request is refused. The Map is kept in order of last use and bounded:
 * when it is full, buckets that have refilled are dropped first (they change nothing), then the least
 * recently used tenth. Dropping a bucket that was not full only loosens the limit for that key (it starts
 * full again); it never refuses anyone.
 */
export class MemoryRateLimits implements RateLimitStore {
  readonly #buckets = new Map<string, HeldBucket>()
  readonly #now: () => number
  readonly #max: number

  constructor (options: MemoryRateLimitsOptions = {}) {
    this.#now = options.now ?? Date.now
    this.#max = options.maxBuckets ?? DEFAULT_MAX_BUCKETS
    if (!Number.isInteger(this.#max) || this.#max < 1) throw new RangeError('maxBuckets must be a positive integer')
  }

  /** Buckets held (for tests). */
  get size (): number {
    return this.#buckets.size
  }

  async take (key: string, rate: number, burst: number): Promise<number> {
    const limit = { rate, burst }
    const now = this.#now()
    const held = this.#buckets.get(key)
    const result = take(held, limit, now)
    if (result.waitMs > 0) return result.waitMs
    if (held === undefined) {
      if (this.#buckets.size >= this.#max) this.#evict(now)
    } else {
      // Moves the key to the end: the Map stays in order of last use.
      this.#buckets.delete(key)
    }
    this.#buckets.set(key, { ...result.bucket, fullAt: now + msUntilFull(result.bucket, limit) })
    return 0
  }

  /** Makes room for one bucket: drops every refilled bucket, then (if that was not enough) the least recently used tenth. */
  #evict (now: number): void {
    for (const [key, bucket] of this.#buckets) {
      if (bucket.fullAt <= now) this.#buckets.delete(key)
    }
    // Sweeping costs a pass over the Map: leave room for a tenth more before the next sweep.
    let excess = this.#buckets.size - Math.floor(this.#max * 0.9)
    if (excess <= 0) return
    for (const key of this.#buckets.keys()) {
      this.#buckets.delete(key)
      if (--excess <= 0) break
    }
  }
}
