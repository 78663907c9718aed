import { describe, expect, it } from 'vitest'
import type { GatewayStore, TaskResume } from '../../src/store/types.ts'
import { completed, T0, task } from './task-records.ts'
import { freshStoreEachTest } from './fresh-store.ts'

/** Task owners and process leases (failover between gateway processes); runs unchanged against each backend. */
export function ownershipContract (name: string, create: () => Promise<GatewayStore>): void {
  describe(`store contract (owners, leases): ${name}`, () => {
    let store: GatewayStore
    freshStoreEachTest(create, (opened) => { store = opened })

    it('lists the unfinished, live tasks of an owner, oldest first', async () => {
      const later = task({ owner: 'gw-a', createdAt: T0 + 5 })
      const earlier = task({ owner: 'gw-a' })
      const other = task({ owner: 'gw-b' })
      const done = task({ owner: 'gw-a' })
      const expired = task({ owner: 'gw-a', ttlMs: 10 })
      for (const record of [later, earlier, other, done, expired]) await store.tasks.create(record)
      await store.tasks.transition(done.id, ['working'], 'completed', { outcome: completed }, T0 + 1)
      expect((await store.tasks.ownedBy('gw-a', T0 + 20)).map((t) => t.id)).toEqual([earlier.id, later.id])
      expect((await store.tasks.ownedBy('gw-b', T0 + 20)).map((t) => t.id)).toEqual([other.id])
      expect(await store.tasks.ownedBy('gw-c', T0 + 20)).toEqual([])
    })

    it('claims a task only from its current owner, and exactly one of two racing claims wins', async () => {
      const record = task({ owner: 'gw-dead' })
      await store.tasks.create(record)
      expect(await store.tasks.claim(record.id, 'gw-wrong', 'gw-b', T0)).toBeNull()
      const results = await Promise.all([
        store.tasks.claim(record.id, 'gw-dead', 'gw-b', T0),
        store.tasks.claim(record.id, 'gw-dead', 'gw-c', T0),
      ])
      const winners = results.filter((r) => r !== null)
      expect(winners).toHaveLength(1)
      expect(await store.tasks.get(record.id, T0)).toEqual({ ...record, owner: winners[0]!.owner })
      expect(await store.tasks.ownedBy('gw-dead', T0)).toEqual([])
      expect((await store.tasks.ownedBy(winners[0]!.owner, T0)).map((t) => t.id)).toEqual([record.id])
    })

    it('never claims a terminal, expired or unknown task', async () => {
      const done = task({ owner: 'gw-dead' })
      const expired = task({ owner: 'gw-dead', ttlMs: 10 })
      await store.tasks.create(done)
      await store.tasks.create(expired)
      await store.tasks.transition(done.id, ['working'], 'failed', {}, T0 + 1)
      expect(await store.tasks.claim(done.id, 'gw-dead', 'gw-b', T0 + 2)).toBeNull()
      expect(await store.tasks.claim(expired.id, 'gw-dead', 'gw-b', T0 + 20)).toBeNull()
      expect(await store.tasks.claim('no-such-task', 'gw-dead', 'gw-b', T0)).toBeNull()
      expect((await store.tasks.get(done.id, T0 + 2))?.status).toBe('failed')
    })

    it('keeps the owner through status moves', async () => {
      const record = task({ owner: 'gw-a' })
      await store.tasks.create(record)
      const moved = await store.tasks.transition(record.id, ['working'], 'input_required', { statusMessage: 'asking' }, T0 + 1)
      expect(moved?.owner).toBe('gw-a')
      expect((await store.tasks.ownedBy('gw-a', T0 + 1)).map((t) => t.status)).toEqual(['input_required'])
    })

    it('records how the upstream work is reached again, keeps it through a claim, and clears it when the task ends', async () => {
      const resume: TaskResume = { kind: 'native', upstreamTaskId: 'up-1', sessionId: 'sess-9', protocolVersion: '2025-11-25', era: '2025-11-25' }
      const record = task({ owner: 'gw-a' })
      await store.tasks.create(record)
      expect((await store.tasks.get(record.id, T0))?.resume).toBeNull()
      const recorded = await store.tasks.transition(record.id, ['working'], 'working', { resume }, T0 + 1)
      expect(recorded?.resume).toEqual(resume)
      expect(recorded?.statusMessage).toBe(record.statusMessage)
      const asking = await store.tasks.transition(record.id, ['working'], 'input_required', { statusMessage: 'asking' }, T0 + 2)
      expect(asking?.resume).toEqual(resume)
      const claimed = await store.tasks.claim(record.id, 'gw-a', 'gw-b', T0 + 3)
      expect(claimed?.resume).toEqual(resume)
      expect((await store.tasks.ownedBy('gw-b', T0 + 3))[0]?.resume).toEqual(resume)
      const entry = (await store.tasks.timeline(record.id)).find((event) => event.type === 'status' && event.upstreamTask !== undefined)
      expect(entry).toMatchObject({ status: 'working', upstreamTask: 'up-1' })
      const ended = await store.tasks.transition(record.id, ['input_required'], 'completed', { outcome: completed }, T0 + 4)
      expect(ended?.resume).toBeNull()
      expect((await store.tasks.get(record.id, T0 + 4))?.resume).toBeNull()
    })

    it('clears how the upstream work is reached again when told to, and keeps it when a move does not say', async () => {
      const resume: TaskResume = { kind: 'native', upstreamTaskId: 'up-2', sessionId: null, protocolVersion: '2026-07-28', era: '2026-07-28' }
      const record = task({ owner: 'gw-a', resume })
      await store.tasks.create(record)
      expect((await store.tasks.get(record.id, T0))?.resume).toEqual(resume)
      expect((await store.tasks.transition(record.id, ['working'], 'working', { statusMessage: 'still going' }, T0 + 1))?.resume).toEqual(resume)
      expect((await store.tasks.transition(record.id, ['working'], 'working', { resume: null }, T0 + 2))?.resume).toBeNull()
      expect((await store.tasks.get(record.id, T0 + 2))?.resume).toBeNull()
    })

    it('refuses a move made as the owner once another process claimed the task, and changes nothing', async () => {
      const record = task({ owner: 'gw-paused' })
      await store.tasks.create(record)
      expect((await store.tasks.transition(record.id, ['working'], 'working', { statusMessage: 'mine', asOwner: 'gw-paused' }, T0 + 1))?.statusMessage).toBe('mine')
      await store.tasks.claim(record.id, 'gw-paused', 'gw-new', T0 + 2)
      const taken = await store.tasks.transition(record.id, ['working'], 'working', { statusMessage: 'resumed by gw-new', asOwner: 'gw-new' }, T0 + 3)
      expect(taken?.statusMessage).toBe('resumed by gw-new')
      const timeline = await store.tasks.timeline(record.id)
      // The paused process wakes up with its call's outcome, or a status message, and writes as the owner it was.
      expect(await store.tasks.transition(record.id, ['working'], 'completed', { outcome: completed, asOwner: 'gw-paused', by: 'gw-paused' }, T0 + 4)).toBeNull()
      expect(await store.tasks.transition(record.id, ['working'], 'working', { statusMessage: null, resume: null, asOwner: 'gw-paused' }, T0 + 5)).toBeNull()
      expect(await store.tasks.get(record.id, T0 + 5)).toEqual(taken)
      expect(await store.tasks.timeline(record.id)).toEqual(timeline)
      // A move that names no owner (a cancel, served by any process) is not fenced.
      expect((await store.tasks.transition(record.id, ['working'], 'cancelled', { statusMessage: 'cancelled' }, T0 + 6))?.status).toBe('cancelled')
    })

    it('tells the owner of a running task, and null for a terminal, expired or unknown one', async () => {
      const running = task({ owner: 'gw-a' })
      const done = task({ owner: 'gw-a' })
      const expiring = task({ owner: 'gw-a', ttlMs: 10 })
      for (const record of [running, done, expiring]) await store.tasks.create(record)
      await store.tasks.transition(done.id, ['working'], 'completed', { outcome: completed }, T0 + 1)
      expect(await store.tasks.ownerOf(running.id, T0 + 1)).toBe('gw-a')
      await store.tasks.claim(running.id, 'gw-a', 'gw-b', T0 + 2)
      expect(await store.tasks.ownerOf(running.id, T0 + 2)).toBe('gw-b')
      expect(await store.tasks.ownerOf(done.id, T0 + 2)).toBeNull()
      expect(await store.tasks.ownerOf(expiring.id, T0 + 5)).toBe('gw-a')
      expect(await store.tasks.ownerOf(expiring.id, T0 + 20)).toBeNull()
      expect(await store.tasks.ownerOf('no-such-task', T0)).toBeNull()
    })

    it('reports a lease as alive until it lapses, and lapsed until it is released', async () => {
      await store.leases.renew('gw-a', T0 + 100)
      await store.leases.renew('gw-b', T0 + 50)
      expect(await store.leases.alive('gw-a', T0 + 60)).toBe(true)
      expect(await store.leases.alive('gw-b', T0 + 60)).toBe(false)
      expect(await store.leases.alive('gw-never', T0)).toBe(false)
      expect(await store.leases.lapsed(T0 + 60)).toEqual(['gw-b'])
      await store.leases.renew('gw-b', T0 + 200)
      expect(await store.leases.lapsed(T0 + 60)).toEqual([])
      expect((await store.leases.lapsed(T0 + 300)).sort()).toEqual(['gw-a', 'gw-b'])
      await store.leases.release('gw-a')
      expect(await store.leases.lapsed(T0 + 300)).toEqual(['gw-b'])
      expect(await store.leases.alive('gw-a', T0)).toBe(false)
    })
  })
}
