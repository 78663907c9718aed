import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import type { GatewayStore, RateLimitStore } from '../../src/store/types.ts'
import { freshStoreEachTest } from './fresh-store.ts'

/** The token-bucket contract, run against every backend with the backend's own clock. */
export function rateLimitStoreContract (backends: Record<string, () => Promise<GatewayStore>>): void {
  for (const [name, create] of Object.entries(backends)) {
    describe(`RateLimitStore contract: ${name}`, () => {
      let store: RateLimitStore
      freshStoreEachTest(create, (opened) => { store = opened.rateLimits })

      it('take() lets a burst of `burst` through, then names the wait for the next token', async () => {
        const key = `ip:${randomUUID()}`
        const waits: number[] = []
        for (let i = 0; i < 4; i++) waits.push(await store.take(key, 2, 3))
        expect(waits.slice(0, 3)).toEqual([0, 0, 0])
        expect(waits[3]).toBeGreaterThan(0)
        expect(waits[3]).toBeLessThanOrEqual(500)
      })

      it('keeps buckets apart by key', async () => {
        const [a, b] = [`principal:${randomUUID()}`, `principal:${randomUUID()}`]
        expect(await store.take(a, 0.01, 1)).toBe(0)
        expect(await store.take(a, 0.01, 1)).toBeGreaterThan(0)
        expect(await store.take(b, 0.01, 1)).toBe(0)
      })

      it('has a token again once the wait it named has passed', async () => {
        const key = `poll:${randomUUID()}`
        // 5 tokens a second: the second take, however late on a busy machine, comes well within the 200 ms.
        expect(await store.take(key, 5, 1)).toBe(0)
        const wait = await store.take(key, 5, 1)
        expect(wait).toBeGreaterThan(0)
        expect(wait).toBeLessThanOrEqual(200)
        // A timer may fire a little before the wall clock has moved on by its delay: wait on the clock itself.
        // Date.now() counts whole milliseconds, up to one behind the moment the wait was named from: one more.
        const until = Date.now() + wait + 1
        while (Date.now() < until) await sleep(until - Date.now())
        expect(await store.take(key, 5, 1)).toBe(0)
      })

      it('refills up to `burst` and no further', async () => {
        const key = `task-ops:${randomUUID()}`
        // 10 tokens a second: 300 ms would refill three, the bucket keeps two. The three takes that follow would
        // earn a third token only if 100 ms passed between the first and the last, which a loaded machine allows
        // at 100 tokens a second (10 ms) but not here.
        expect(await store.take(key, 10, 2)).toBe(0)
        await sleep(300)
        const waits = await Promise.all([1, 2, 3].map(async () => await store.take(key, 10, 2)))
        expect(waits.filter((w) => w === 0)).toHaveLength(2)
      })

      it('is atomic: of many concurrent takes from one bucket, exactly `burst` get a token', async () => {
        const key = `ip:${randomUUID()}`
        const waits = await Promise.all(Array.from({ length: 30 }, async () => await store.take(key, 0.001, 5)))
        expect(waits.filter((w) => w === 0)).toHaveLength(5)
        expect(Math.min(...waits.filter((w) => w > 0))).toBeGreaterThan(0)
      })
    })
  }
}
