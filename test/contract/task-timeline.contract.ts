import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { TIMELINE_LIMIT } from '../../src/store/task-timeline.ts'
import type { GatewayStore, TaskStore } from '../../src/store/types.ts'
import { completed, input, T0, task } from './task-records.ts'
import { freshStoreEachTest } from './fresh-store.ts'

/** Each task's timeline, written by the store with the change it records; runs unchanged against each backend. */
export function taskTimelineContract (name: string, create: () => Promise<GatewayStore>): void {
  describe(`store contract (task timelines): ${name}`, () => {
    let store: TaskStore
    freshStoreEachTest(create, (opened) => { store = opened.tasks })

    it('starts a task\'s timeline with its creation by its owner; an unknown task has none', async () => {
      const record = task({ owner: 'gw-a' })
      await store.create(record)
      expect(await store.timeline(record.id)).toEqual([{ type: 'created', at: T0, process: 'gw-a' }])
      expect(await store.timeline(randomUUID())).toEqual([])
    })

    it('records every move that wins, with its statusMessage, its process and the stored result\'s size; a move that loses writes nothing', async () => {
      const record = task({ owner: 'gw-a' })
      await store.create(record)
      await store.transition(record.id, ['working'], 'input_required', { statusMessage: 'waiting for the user', by: 'gw-a' }, T0 + 1)
      await store.transition(record.id, ['input_required'], 'working', { statusMessage: null }, T0 + 2)
      expect(await store.transition(record.id, ['input_required'], 'failed', { statusMessage: 'lost', by: 'gw-b' }, T0 + 3)).toBeNull()
      await store.transition(record.id, ['working'], 'completed', { statusMessage: null, outcome: completed, by: 'gw-b' }, T0 + 4)
      expect(await store.transition(record.id, ['working', 'input_required'], 'cancelled', { statusMessage: 'too late', by: 'gw-a' }, T0 + 5)).toBeNull()

      expect(await store.timeline(record.id)).toEqual([
        { type: 'created', at: T0, process: 'gw-a' },
        { type: 'status', at: T0 + 1, status: 'input_required', statusMessage: 'waiting for the user', process: 'gw-a' },
        { type: 'status', at: T0 + 2, status: 'working', statusMessage: null },
        { type: 'status', at: T0 + 4, status: 'completed', statusMessage: null, process: 'gw-b', resultBytes: Buffer.byteLength(JSON.stringify(completed)) },
      ])
    })

    it('gives a failure\'s size in bytes of its JSON, multi-byte characters counted as bytes', async () => {
      const record = task()
      await store.create(record)
      const outcome = { error: { code: -32603, message: 'échec ☂', data: { reason: 'disque plein' } } }
      await store.transition(record.id, ['working'], 'failed', { statusMessage: 'échec ☂', outcome }, T0 + 1)
      const [, failed] = await store.timeline(record.id)
      expect(failed).toMatchObject({ type: 'status', status: 'failed', resultBytes: Buffer.byteLength(JSON.stringify(outcome), 'utf8') })
      expect((failed as { resultBytes: number }).resultBytes).toBeGreaterThan(JSON.stringify(outcome).length)
    })

    it('records each input request and how it was settled, once', async () => {
      const record = task()
      await store.create(record)
      const asked = input(record, { createdAt: T0 + 10, method: 'elicitation/create' })
      const roots = input(record, { createdAt: T0 + 20, method: 'roots/list', params: {} })
      await store.addInput(asked, 5)
      await store.addInput(roots, 5)
      expect(await store.settleInput(asked.key, 'answered', { result: { action: 'accept' } }, T0 + 30)).toBe(true)
      expect(await store.settleInput(asked.key, 'expired', null, T0 + 35)).toBe(false)
      expect(await store.settleInput(roots.key, 'expired', null, T0 + 40)).toBe(true)

      expect((await store.timeline(record.id)).slice(1)).toEqual([
        { type: 'input', at: T0 + 10, key: asked.key, method: 'elicitation/create' },
        { type: 'input', at: T0 + 20, key: roots.key, method: 'roots/list' },
        { type: 'input_settled', at: T0 + 30, key: asked.key, state: 'answered' },
        { type: 'input_settled', at: T0 + 40, key: roots.key, state: 'expired' },
      ])
    })

    it('records a takeover by another process; a claim that loses writes nothing', async () => {
      const record = task({ owner: 'gw-dead' })
      await store.create(record)
      expect(await store.claim(record.id, 'gw-wrong', 'gw-c', T0 + 1)).toBeNull()
      await store.claim(record.id, 'gw-dead', 'gw-b', T0 + 2)
      expect((await store.timeline(record.id)).slice(1)).toEqual([{ type: 'claimed', at: T0 + 2, process: 'gw-b', from: 'gw-dead' }])
    })

    it(`keeps the newest ${TIMELINE_LIMIT} entries of a task, oldest first`, async () => {
      const record = task()
      const other = task()
      await store.create(record)
      await store.create(other)
      const moves = TIMELINE_LIMIT + 20
      for (let i = 1; i <= moves; i++) await store.transition(record.id, ['working'], 'working', { statusMessage: `step ${i}` }, T0 + i)
      const timeline = await store.timeline(record.id)
      expect(timeline).toHaveLength(TIMELINE_LIMIT)
      expect(timeline[0]).toEqual({ type: 'status', at: T0 + moves - TIMELINE_LIMIT + 1, status: 'working', statusMessage: `step ${moves - TIMELINE_LIMIT + 1}` })
      expect(timeline.at(-1)).toEqual({ type: 'status', at: T0 + moves, status: 'working', statusMessage: `step ${moves}` })
      // Another task's timeline is its own.
      expect(await store.timeline(other.id)).toEqual([{ type: 'created', at: T0, process: other.owner }])
    })

    it('deletes a task\'s timeline with the task when it is swept', async () => {
      const expiring = task({ ttlMs: 100 })
      const staying = task({ ttlMs: 60_000 })
      await store.create(expiring)
      await store.create(staying)
      await store.addInput(input(expiring), 5)
      expect(await store.sweep(T0 + 200)).toBe(1)
      expect(await store.timeline(expiring.id)).toEqual([])
      expect(await store.timeline(staying.id)).toHaveLength(1)
    })
  })
}
