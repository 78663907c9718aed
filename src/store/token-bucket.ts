/**
 * Token-bucket arithmetic, shared by the in-process bucket store and mirrored by the Redis script
 * (redis-rate-limits.ts). A bucket holds at most `burst` tokens and gains `rate` tokens per second; a
 * request takes one token or is refused. A bucket nobody has used yet is full.
 *
 * Pure: the clock is an argument, so the arithmetic is tested without waiting.
 */

/** The size and refill speed of a bucket (the shape of a `limits.*` bucket in the configuration). */
export interface BucketLimit {
  /** Tokens added per second. */
  readonly rate: number
  /** Most tokens the bucket holds. */
  readonly burst: number
}

export interface Bucket {
  /** Tokens held at `at`; fractional. */
  tokens: number
  /** Epoch milliseconds of the last update. */
  at: number
}

/** The bucket as it is at `now`. A clock that went back refills nothing (and takes nothing away). */
export function refilled (bucket: Bucket | undefined, limit: BucketLimit, now: number): Bucket {
  if (bucket === undefined) return { tokens: limit.burst, at: now }
  if (now <= bucket.at) return { tokens: Math.min(limit.burst, bucket.tokens), at: bucket.at }
  return { tokens: Math.min(limit.burst, bucket.tokens + (now - bucket.at) * limit.rate / 1000), at: now }
}

export interface Take {
  /** The bucket after the attempt (unchanged apart from its refill when the attempt was refused). */
  bucket: Bucket
  /** 0 when a token was taken; else the milliseconds until one token is there (at least 1). */
  waitMs: number
}

/** Takes one token from the bucket as it is at `now`. */
export function take (bucket: Bucket | undefined, limit: BucketLimit, now: number): Take {
  const current = refilled(bucket, limit, now)
  if (current.tokens >= 1) return { bucket: { tokens: current.tokens - 1, at: current.at }, waitMs: 0 }
  return { bucket: current, waitMs: Math.max(1, Math.ceil((1 - current.tokens) * 1000 / limit.rate)) }
}

/** Milliseconds until the bucket is full again: from then on it is the same as a bucket never used. */
export function msUntilFull (bucket: Bucket, limit: BucketLimit): number {
  return Math.max(0, Math.ceil((limit.burst - bucket.tokens) * 1000 / limit.rate))
}

/** A wait in milliseconds as a Retry-After value: whole seconds, rounded up, at least 1. */
export function retryAfterSeconds (waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000))
}
