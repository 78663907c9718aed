import { describe, expect, it } from 'vitest'
import { MemoryRateLimits } from '../../src/store/memory/memory-rate-limits.ts'
import { msUntilFull, refilled, retryAfterSeconds, take, type Bucket } from '../../src/store/token-bucket.ts'

const LIMIT = { rate: 2, burst: 3 }

/** Takes `count` tokens at `now`, one after the other; returns each wait and the bucket afterwards. */
function takeMany (bucket: Bucket | undefined, count: number, now: number): { waits: number[], bucket: Bucket | undefined } {
  const waits: number[] = []
  for (let i = 0; i < count; i++) {
    const result = take(bucket, LIMIT, now)
    waits.push(result.waitMs)
    bucket = result.bucket
  }
  return { waits, bucket }
}

describe('token bucket arithmetic', () => {
  it('starts full: a burst of `burst` passes at once, the next waits for one token', () => {
    const { waits, bucket } = takeMany(undefined, 4, 1000)
    expect(waits).toEqual([0, 0, 0, 500])
    expect(bucket).toEqual({ tokens: 0, at: 1000 })
  })

  it('refills at `rate` tokens per second, fractions included', () => {
    const { bucket } = takeMany(undefined, 3, 1000)
    expect(refilled(bucket, LIMIT, 1250)).toEqual({ tokens: 0.5, at: 1250 })
    expect(take(bucket, LIMIT, 1250).waitMs).toBe(250)
    expect(take(bucket, LIMIT, 1500)).toEqual({ bucket: { tokens: 0, at: 1500 }, waitMs: 0 })
  })

  it('never holds more than `burst` tokens however long it idled', () => {
    const { bucket } = takeMany(undefined, 3, 1000)
    expect(refilled(bucket, LIMIT, 1000 + 3_600_000).tokens).toBe(3)
    expect(takeMany(bucket, 4, 1000 + 3_600_000).waits).toEqual([0, 0, 0, 500])
  })

  it('a refused take changes nothing but the refill', () => {
    const { bucket } = takeMany(undefined, 3, 1000)
    const refused = take(bucket, LIMIT, 1100)
    expect(refused).toEqual({ bucket: { tokens: 0.2, at: 1100 }, waitMs: 400 })
    expect(take(refused.bucket, LIMIT, 1500).waitMs).toBe(0)
  })

  it('a clock that goes back neither refills nor drains the bucket', () => {
    const { bucket } = takeMany(undefined, 2, 1000)
    expect(refilled(bucket, LIMIT, 500)).toEqual({ tokens: 1, at: 1000 })
    expect(take(bucket, LIMIT, 500).waitMs).toBe(0)
  })

  it('tells how long until the bucket is full again', () => {
    expect(msUntilFull({ tokens: 0, at: 0 }, LIMIT)).toBe(1500)
    expect(msUntilFull({ tokens: 2.5, at: 0 }, LIMIT)).toBe(250)
    expect(msUntilFull({ tokens: 3, at: 0 }, LIMIT)).toBe(0)
  })

  it('turns a wait into a Retry-After: whole seconds, rounded up, at least 1', () => {
    expect([1, 999, 1000, 1001, 29_500].map(retryAfterSeconds)).toEqual([1, 1, 1, 2, 30])
  })
})

describe('MemoryRateLimits', () => {
  it('keeps one bucket per key on its own clock', async () => {
    let now = 0
    const store = new MemoryRateLimits({ now: () => now })
    expect(await Promise.all([1, 2, 3, 4].map(async () => await store.take('a', 10, 3)))).toEqual([0, 0, 0, 100])
    expect(await store.take('b', 10, 3)).toBe(0)
    now = 100
    expect(await store.take('a', 10, 3)).toBe(0)
    expect(await store.take('a', 10, 3)).toBe(100)
  })

  it('stays within maxBuckets, dropping refilled buckets first and then the least recently used', async () => {
    let now = 0
    const store = new MemoryRateLimits({ now: () => now, maxBuckets: 10 })
    for (let i = 0; i < 10; i++) await store.take(`k${i}`, 1, 2)
    expect(store.size).toBe(10)
    // k0 is used again (most recent); k1..k9 are not.
    await store.take('k0', 1, 2)
    await store.take('k0', 1, 2)
    await store.take('new-1', 1, 2)
    expect(store.size).toBeLessThanOrEqual(10)
    // k0 was kept (recently used and still empty): its next take waits.
    expect(await store.take('k0', 1, 2)).toBeGreaterThan(0)

    // Once every bucket has refilled, making room drops them all: they are the same as new ones.
    now = 10_000
    for (let i = 0; i < 5; i++) await store.take(`later-${i}`, 1, 2)
    expect(store.size).toBeLessThanOrEqual(10)
    expect(await store.take('k0', 1, 2)).toBe(0)
  })
})
