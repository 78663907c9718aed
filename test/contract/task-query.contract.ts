import { describe, expect, it } from 'vitest'
import type { GatewayStore, TaskCursor, TaskQuery, TaskRecord, TaskStore } from '../../src/store/types.ts'
import { completed, T0, task } from './task-records.ts'
import { freshStoreEachTest } from './fresh-store.ts'

/** The operator's query over the tasks of every principal (the admin API); runs unchanged against each backend. */
export function taskQueryContract (name: string, create: () => Promise<GatewayStore>): void {
  describe(`store contract (tasks of every principal): ${name}`, () => {
    let store: TaskStore
    freshStoreEachTest(create, (opened) => { store = opened.tasks })

    async function created (overrides: Partial<TaskRecord>): Promise<TaskRecord> {
      const record = task(overrides)
      await store.create(record)
      return record
    }

    /** Every page of the query, `size` at a time, following the cursor of each page's last task. */
    async function allPages (query: TaskQuery, size: number, now = T0): Promise<string[]> {
      const ids: string[] = []
      let before: TaskCursor | undefined
      for (;;) {
        const page = await store.query(query, before, size, now)
        ids.push(...page.map((t) => t.id))
        if (page.length < size) return ids
        const last = page.at(-1)!
        before = { createdAt: last.createdAt, id: last.id }
      }
    }

    it('lists the tasks of every principal, newest first (ties: greater id first)', async () => {
      const a = await created({ principal: 'alice', id: 'task-a', createdAt: T0 })
      const b = await created({ principal: 'bob', id: 'task-b', createdAt: T0 + 5 })
      const c = await created({ principal: 'alice', id: 'task-c', createdAt: T0 + 5 })
      const d = await created({ principal: 'carol', id: 'task-d', createdAt: T0 + 9 })
      expect((await store.query({}, undefined, 10, T0)).map((t) => t.id)).toEqual([d.id, c.id, b.id, a.id])
      expect(await store.query({}, undefined, 10, T0)).toContainEqual(b)
    })

    it('pages through every task exactly once with the cursor of the last one seen', async () => {
      const ids: string[] = []
      for (let i = 0; i < 23; i++) ids.push((await created({ principal: `p${i % 3}`, id: `t-${String(i).padStart(2, '0')}`, createdAt: T0 + Math.floor(i / 4) })).id)
      expect(await allPages({}, 5)).toEqual([...ids].reverse())
      expect(await allPages({}, 1)).toEqual([...ids].reverse())
    })

    it('filters by status, upstream, tool and principal, alone and together', async () => {
      const working = await created({ principal: 'alice', upstream: 'demo', tool: 'slow', createdAt: T0 })
      const done = await created({ principal: 'bob', upstream: 'demo', tool: 'slow', createdAt: T0 + 1 })
      await store.transition(done.id, ['working'], 'completed', { outcome: completed }, T0 + 2)
      const other = await created({ principal: 'alice', upstream: 'files', tool: 'read', createdAt: T0 + 3 })
      const ids = async (query: TaskQuery): Promise<string[]> => (await store.query(query, undefined, 10, T0 + 4)).map((t) => t.id)
      expect(await ids({ status: 'completed' })).toEqual([done.id])
      expect(await ids({ status: 'working' })).toEqual([other.id, working.id])
      expect(await ids({ upstream: 'demo' })).toEqual([done.id, working.id])
      expect(await ids({ tool: 'read' })).toEqual([other.id])
      expect(await ids({ principal: 'alice' })).toEqual([other.id, working.id])
      expect(await ids({ principal: 'alice', upstream: 'demo', tool: 'slow', status: 'working' })).toEqual([working.id])
      expect(await ids({ principal: 'nobody' })).toEqual([])
    })

    it('pages through a filtered query that skips most tasks', async () => {
      const wanted: string[] = []
      for (let i = 0; i < 450; i++) {
        const record = await created({ principal: i % 50 === 0 ? 'rare' : 'common', id: `t-${String(i).padStart(3, '0')}`, createdAt: T0 + i })
        if (record.principal === 'rare') wanted.push(record.id)
      }
      expect(await allPages({ principal: 'rare' }, 4)).toEqual([...wanted].reverse())
    })

    it('leaves out tasks past their TTL, and swept ones', async () => {
      const short = await created({ principal: 'alice', ttlMs: 1_000, createdAt: T0 })
      const long = await created({ principal: 'bob', ttlMs: 60_000, createdAt: T0 })
      expect((await store.query({}, undefined, 10, T0 + 500)).map((t) => t.id).sort()).toEqual([short.id, long.id].sort())
      expect((await store.query({}, undefined, 10, T0 + 1_000)).map((t) => t.id)).toEqual([long.id])
      await store.sweep(T0 + 1_000)
      expect((await store.query({}, undefined, 10, T0)).map((t) => t.id)).toEqual([long.id])
    })

    it('returns nothing for a limit of 0', async () => {
      await created({ principal: 'alice' })
      expect(await store.query({}, undefined, 0, T0)).toEqual([])
    })
  })
}
