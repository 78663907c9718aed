import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import type { GatewayStore, HomeStore } from '../../src/store/types.ts'
import { freshStoreEachTest } from './fresh-store.ts'

/** Client homes (which process serves a client's upstream sessions); runs unchanged against each backend. */
export function homeStoreContract (name: string, create: () => Promise<GatewayStore>): void {
  describe(`store contract (client homes): ${name}`, () => {
    let homes: HomeStore
    const client = (): string => `session:${randomUUID()}`
    freshStoreEachTest(create, (opened) => { homes = opened.homes })

    it('gives a client without a home to the first claimant, and exactly one of two racing claims wins', async () => {
      const key = client()
      const results = await Promise.all([homes.claim(key, null, 'gw-a', 60_000), homes.claim(key, null, 'gw-b', 60_000)])
      expect(new Set(results).size).toBe(1)
      const winner = results[0]!
      expect(['gw-a', 'gw-b']).toContain(winner)
      expect(await homes.claim(key, null, 'gw-c', 60_000)).toBe(winner)
      expect(await homes.claim(key, null, winner, 60_000)).toBe(winner)
    })

    it('replaces a home only when the claimant names it as the one gone', async () => {
      const key = client()
      await homes.claim(key, null, 'gw-dead', 60_000)
      expect(await homes.claim(key, 'gw-other', 'gw-b', 60_000)).toBe('gw-dead')
      const results = await Promise.all([homes.claim(key, 'gw-dead', 'gw-b', 60_000), homes.claim(key, 'gw-dead', 'gw-c', 60_000)])
      expect(new Set(results).size).toBe(1)
      expect(['gw-b', 'gw-c']).toContain(results[0])
    })

    it('forgets a home that is not renewed within its ttl, and keeps one that is', async () => {
      const [kept, dropped] = [client(), client()]
      // A ttl long enough that the renewal lands within it on a busy machine, short enough to wait out.
      await homes.claim(kept, null, 'gw-a', 400)
      await homes.claim(dropped, null, 'gw-a', 400)
      expect(await homes.renew('gw-a', [kept], 60_000)).toEqual([])
      const until = Date.now() + 450
      while (Date.now() < until) await sleep(until - Date.now())
      expect(await homes.claim(dropped, null, 'gw-b', 60_000)).toBe('gw-b')
      expect(await homes.claim(kept, null, 'gw-b', 60_000)).toBe('gw-a')
    })

    it('renews only the homes it still holds, and names the others', async () => {
      const [mine, taken, unknown] = [client(), client(), client()]
      await homes.claim(mine, null, 'gw-a', 60_000)
      await homes.claim(taken, null, 'gw-b', 60_000)
      expect((await homes.renew('gw-a', [mine, taken, unknown], 60_000)).sort()).toEqual([taken, unknown].sort())
      expect(await homes.renew('gw-a', [], 60_000)).toEqual([])
    })

    it('releases a home only for its holder', async () => {
      const key = client()
      await homes.claim(key, null, 'gw-a', 60_000)
      await homes.release(key, 'gw-b')
      expect(await homes.claim(key, null, 'gw-b', 60_000)).toBe('gw-a')
      await homes.release(key, 'gw-a')
      expect(await homes.claim(key, null, 'gw-b', 60_000)).toBe('gw-b')
    })
  })
}
