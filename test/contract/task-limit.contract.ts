import { randomUUID } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { GatewayStore } from '../../src/store/types.ts'
import { completed, T0, task } from './task-records.ts'

/**
 * The per-principal limit on unfinished tasks (tasks.maxActivePerPrincipal), checked by the store in the
 * same atomic step as the insert. `open` gives the stores of every process that shares one backend: one
 * for a store only one process uses, two for a shared one, so that the race also runs between processes.
 */
export function taskLimitContract (name: string, open: () => Promise<GatewayStore[]>): void {
  describe(`store contract (task limit): ${name}`, () => {
    let stores: GatewayStore[]

    beforeEach(async () => {
      stores = await open()
    })

    afterEach(async () => {
      for (const store of stores.toReversed()) await store.close()
    })

    it('of many racing creates of one principal, exactly maxActive are stored; the rest get GW_ERR_TASK_LIMIT', async () => {
      const principal = `principal:${randomUUID()}`
      const maxActive = 7
      const attempts = Array.from({ length: 60 }, (_, i) => {
        const record = task({ principal, createdAt: T0 + i, lastUpdatedAt: T0 + i })
        return stores[i % stores.length]!.tasks.create(record, { maxActive }).then(() => record.id)
      })
      const settled = await Promise.allSettled(attempts)
      const accepted = settled.filter((s) => s.status === 'fulfilled')
      const refused = settled.filter((s) => s.status === 'rejected')
      expect({ accepted: accepted.length, refused: refused.length }).toEqual({ accepted: maxActive, refused: 60 - maxActive })
      for (const failure of refused) expect(failure.reason).toMatchObject({ code: 'GW_ERR_TASK_LIMIT', message: expect.stringContaining(`${maxActive} of ${maxActive}`) })
      const store = stores[0]!.tasks
      expect(await store.countActive(principal, T0 + 100)).toBe(maxActive)
      expect((await store.list(principal, undefined, 100, T0 + 100)).map((t) => t.id).sort())
        .toEqual(accepted.map((s) => s.value).sort())
    })

    it('counts only the live, unfinished tasks of the principal', async () => {
      const principal = `principal:${randomUUID()}`
      const store = stores[0]!.tasks
      const done = task({ principal })
      const expired = task({ principal, ttlMs: 5 })
      await store.create(done, { maxActive: 2 })
      await store.create(expired, { maxActive: 2 })
      await store.create(task(), { maxActive: 2 })
      await store.transition(done.id, ['working'], 'completed', { outcome: completed }, T0 + 1)
      // Now: one finished, one expired, one of another principal; two more of this principal fit.
      await store.create(task({ principal, createdAt: T0 + 10 }), { maxActive: 2 })
      await store.create(task({ principal, createdAt: T0 + 10 }), { maxActive: 2 })
      const over = task({ principal, createdAt: T0 + 10 })
      await expect(store.create(over, { maxActive: 2 })).rejects.toMatchObject({ code: 'GW_ERR_TASK_LIMIT' })
      expect(await store.get(over.id, T0 + 10)).toBeNull()
    })

    it('frees a place when one of the principal\'s tasks ends or expires, and not before', async () => {
      const principal = `principal:${randomUUID()}`
      const store = stores[0]!.tasks
      const at = (ms: number, ttlMs: number | null = null) => task({ principal, createdAt: T0 + ms, lastUpdatedAt: T0 + ms, ttlMs })
      const refused = { code: 'GW_ERR_TASK_LIMIT' }
      const expiring = at(0, 1000)
      const ending = at(0)
      await store.create(expiring, { maxActive: 2 })
      await store.create(ending, { maxActive: 2 })
      await expect(store.create(at(1), { maxActive: 2 })).rejects.toMatchObject(refused)
      expect(await store.transition(ending.id, ['working'], 'completed', { outcome: completed }, T0 + 2)).not.toBeNull()
      await store.create(at(3), { maxActive: 2 })
      await expect(store.create(at(4), { maxActive: 2 })).rejects.toMatchObject(refused)
      // The first task's TTL is over: its place is free although it never ended.
      await store.create(at(1001), { maxActive: 2 })
      await expect(store.create(at(1002), { maxActive: 2 })).rejects.toMatchObject(refused)
      expect(await store.countActive(principal, T0 + 1002)).toBe(2)
    })

    it('without maxActive, create() stores the task whatever the count', async () => {
      const principal = `principal:${randomUUID()}`
      const store = stores[0]!.tasks
      for (let i = 0; i < 3; i++) await store.create(task({ principal }))
      expect(await store.countActive(principal, T0)).toBe(3)
    })
  })
}
