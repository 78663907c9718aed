import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import type { GatewayStore, TaskRecord, TaskStore } from '../../src/store/types.ts'
import { RESUME, restatement, sourcesOf } from '../../src/wire/task-state.ts'
import { completed, input, rpcFailure, T0, task } from './task-records.ts'
import { freshStoreEachTest } from './fresh-store.ts'

/** The behaviour every store must show for tasks and input queues; runs unchanged against each backend. */
export function taskStoreContract (name: string, create: () => Promise<GatewayStore>): void {
  describe(`store contract (tasks, inputs): ${name}`, () => {
    let store: TaskStore
    freshStoreEachTest(create, (opened) => { store = opened.tasks })

    async function created (overrides: Partial<TaskRecord> = {}): Promise<TaskRecord> {
      const record = task(overrides)
      await store.create(record)
      return record
    }

    describe('records', () => {
      it('get() returns null for an unknown id', async () => {
        expect(await store.get(randomUUID(), T0)).toBeNull()
      })

      it('returns a created task with every field intact', async () => {
        const full = await created({ progressToken: 42, outcome: rpcFailure })
        const sparse = await created({ sessionId: null, era: '2026-07-28', statusMessage: null, ttlMs: null, progressToken: null, traceContext: null })
        expect(await store.get(full.id, T0)).toEqual(full)
        expect(await store.get(sparse.id, T0)).toEqual(sparse)
        expect(await store.get(full.id, T0)).toHaveProperty('progressToken', 42)
        expect(await store.get(sparse.id, T0)).toHaveProperty('progressToken', null)
        expect(await store.get(full.id, T0)).toHaveProperty('traceContext', task().traceContext)
        expect(await store.get(sparse.id, T0)).toHaveProperty('traceContext', null)
      })

      it('callers cannot change stored state through records they passed in or got back', async () => {
        const record = await created()
        record.status = 'failed'
        ;(record.request['arguments'] as Record<string, unknown>)['text'] = 'changed'
        const got = await store.get(record.id, T0)
        // A store hands out a copy or a frozen record (memory: reads are not copied); either way its state stays.
        try {
          got!.clientCapabilities['roots'] = {}
        } catch (err) {
          expect(err).toBeInstanceOf(TypeError)
        }
        const stored = await store.get(record.id, T0)
        expect(stored?.status).toBe('working')
        expect(stored?.request).toEqual(task().request)
        expect(stored?.clientCapabilities).toEqual(task().clientCapabilities)

        const queued = input(stored!)
        await store.addInput(queued, 5)
        queued.params['message'] = 'changed'
        ;(await store.getInput(queued.key))!.params['message'] = 'changed too'
        expect((await store.getInput(queued.key))?.params['message']).toBe('Which colour?')
      })
    })

    describe('transitions', () => {
      it('moves the status only when it is one of `from`', async () => {
        const record = await created()
        expect(await store.transition(record.id, ['input_required'], 'working', {}, T0 + 1)).toBeNull()
        expect(await store.get(record.id, T0)).toEqual(record)

        const moved = await store.transition(record.id, sourcesOf('input_required'), 'input_required', {}, T0 + 2)
        expect(moved).toEqual({ ...record, status: 'input_required', lastUpdatedAt: T0 + 2 })
        expect(await store.get(record.id, T0)).toEqual(moved)
      })

      it('returns null for an unknown task', async () => {
        expect(await store.transition(randomUUID(), ['working'], 'completed', {}, T0)).toBeNull()
      })

      it('returns null for an empty `from` list', async () => {
        const record = await created()
        expect(await store.transition(record.id, [], 'completed', {}, T0)).toBeNull()
        expect((await store.get(record.id, T0))?.status).toBe('working')
      })

      it('never changes a terminal task', async () => {
        for (const end of ['completed', 'failed', 'cancelled'] as const) {
          const record = await created()
          const ended = await store.transition(record.id, sourcesOf(end), end, { statusMessage: end, outcome: completed }, T0 + 1)
          expect(ended?.status).toBe(end)
          expect(await store.transition(record.id, ['working', 'input_required'], 'cancelled', { statusMessage: 'late' }, T0 + 2)).toBeNull()
          expect(await store.transition(record.id, ['working', 'input_required'], 'working', {}, T0 + 2)).toBeNull()
          // Even a caller naming the terminal status as `from` cannot move or rewrite it.
          expect(await store.transition(record.id, [end], 'working', {}, T0 + 3)).toBeNull()
          expect(await store.transition(record.id, [end], end, { outcome: rpcFailure }, T0 + 3)).toBeNull()
          expect(await store.get(record.id, T0)).toEqual(ended)
        }
      })

      it('of a racing cancel and completion exactly one wins, and the task shows the winner', async () => {
        for (let round = 0; round < 10; round++) {
          const record = await created()
          const results = await Promise.allSettled([
            store.transition(record.id, sourcesOf('cancelled'), 'cancelled', { statusMessage: 'cancelled by the client' }, T0 + 1),
            store.transition(record.id, sourcesOf('completed'), 'completed', { statusMessage: null, outcome: completed }, T0 + 2),
          ])
          const values = results.map((result) => {
            expect(result.status).toBe('fulfilled')
            return result.status === 'fulfilled' ? result.value : undefined
          })
          const winners = values.filter((value) => value !== null)
          expect(winners).toHaveLength(1)
          expect(await store.get(record.id, T0)).toEqual(winners[0])
        }
      })

      it('a working task may be patched in place and may move to input_required and back', async () => {
        const record = await created()
        const patched = await store.transition(record.id, ['working'], 'working', { statusMessage: null }, T0 + 1)
        expect(patched).toMatchObject({ status: 'working', statusMessage: null, lastUpdatedAt: T0 + 1 })
        expect(await store.transition(record.id, sourcesOf('input_required'), 'input_required', {}, T0 + 2)).toMatchObject({ status: 'input_required' })
        expect(await store.transition(record.id, sourcesOf('working'), 'working', {}, T0 + 3)).toMatchObject({ status: 'working', lastUpdatedAt: T0 + 3 })
      })

      it('keeps the mark of a call not yet sent upstream through a claim, until a move clears it or ends the task', async () => {
        const record = await created()
        const queued = await store.transition(record.id, ['working'], 'working', { statusMessage: 'queued', resume: { kind: 'unsent' } }, T0 + 1)
        expect(queued).toMatchObject({ statusMessage: 'queued', resume: { kind: 'unsent' } })
        const claimed = await store.claim(record.id, record.owner, 'taker', T0 + 2)
        expect(claimed).toMatchObject({ owner: 'taker', resume: { kind: 'unsent' } })
        expect((await store.ownedBy('taker', T0 + 2)).map((task) => task.resume)).toEqual([{ kind: 'unsent' }])
        expect(await store.transition(record.id, ['working'], 'working', { statusMessage: null, resume: null }, T0 + 3)).toMatchObject({ statusMessage: null, resume: null })
        expect((await store.get(record.id, T0 + 3))?.resume).toBeNull()

        const other = await created()
        await store.transition(other.id, ['working'], 'working', { statusMessage: 'queued', resume: { kind: 'unsent' } }, T0 + 1)
        expect(await store.transition(other.id, sourcesOf('failed'), 'failed', { statusMessage: 'x', outcome: rpcFailure }, T0 + 2)).toMatchObject({ resume: null })
      })

      it('a task waiting for input restates its wait in place, and only a waiting task resumes', async () => {
        const record = await created()
        expect(await store.transition(record.id, RESUME.from, RESUME.to, {}, T0 + 1)).toBeNull()
        await store.transition(record.id, sourcesOf('input_required'), 'input_required', { statusMessage: 'first question' }, T0 + 2)
        const again = restatement('input_required')
        const restated = await store.transition(record.id, again.from, again.to, { statusMessage: 'second question' }, T0 + 3)
        expect(restated).toMatchObject({ status: 'input_required', statusMessage: 'second question', lastUpdatedAt: T0 + 3 })
        expect(await store.transition(record.id, RESUME.from, RESUME.to, { statusMessage: null }, T0 + 4)).toMatchObject({ status: 'working', statusMessage: null })
      })

      it('applies the patch: statusMessage undefined keeps, null clears; outcome is stored verbatim', async () => {
        const record = await created({ statusMessage: 'starting' })
        const kept = await store.transition(record.id, ['working'], 'input_required', {}, T0 + 1)
        expect(kept?.statusMessage).toBe('starting')
        expect(kept?.outcome).toBeNull()

        const set = await store.transition(record.id, ['input_required'], 'working', { statusMessage: 'asked the user' }, T0 + 2)
        expect(set?.statusMessage).toBe('asked the user')

        const cleared = await store.transition(record.id, ['working'], 'failed', { statusMessage: null, outcome: rpcFailure }, T0 + 3)
        expect(cleared?.statusMessage).toBeNull()
        expect(cleared?.outcome).toEqual(rpcFailure)
        expect((await store.get(record.id, T0))?.outcome).toEqual({
          error: { code: -32603, message: 'upstream broke', data: { reason: 'disk full', retry: [1, 2] } },
        })
      })

      it('keeps an outcome that a later patch does not mention', async () => {
        const record = await created()
        await store.transition(record.id, ['working'], 'working', { outcome: completed }, T0 + 1)
        const next = await store.transition(record.id, ['working'], 'completed', { statusMessage: 'done' }, T0 + 2)
        expect(next?.outcome).toEqual(completed)
      })

      it('keeps the request (arguments) while the task runs, and drops it once the task has ended', async () => {
        for (const end of ['completed', 'failed', 'cancelled'] as const) {
          const record = await created()
          const asking = await store.transition(record.id, sourcesOf('input_required'), 'input_required', {}, T0 + 1)
          expect(asking?.request).toEqual(record.request)
          const ended = await store.transition(record.id, sourcesOf(end), end, { outcome: completed }, T0 + 2)
          expect(ended?.request).toEqual({})
          expect(await store.get(record.id, T0)).toEqual({ ...record, status: end, lastUpdatedAt: T0 + 2, outcome: completed, request: {} })
        }
      })

      it('sets lastUpdatedAt to `now` on every move, and only then', async () => {
        const record = await created()
        await store.transition(record.id, ['working'], 'input_required', {}, T0 + 500)
        expect((await store.get(record.id, T0))?.lastUpdatedAt).toBe(T0 + 500)
        await store.transition(record.id, ['working'], 'completed', {}, T0 + 900)
        expect((await store.get(record.id, T0))?.lastUpdatedAt).toBe(T0 + 500)
        await store.transition(record.id, ['input_required'], 'completed', {}, T0 + 900)
        expect((await store.get(record.id, T0))?.lastUpdatedAt).toBe(T0 + 900)
      })
    })

    describe('TTL', () => {
      it('a task is invisible from createdAt + ttlMs on', async () => {
        const record = await created({ ttlMs: 5_000 })
        const expiry = T0 + 5_000
        expect(await store.get(record.id, expiry - 1)).toEqual(record)
        expect(await store.list(record.principal, undefined, 10, expiry - 1)).toHaveLength(1)
        expect(await store.countActive(record.principal, expiry - 1)).toBe(1)

        expect(await store.get(record.id, expiry)).toBeNull()
        expect(await store.list(record.principal, undefined, 10, expiry)).toEqual([])
        expect(await store.countActive(record.principal, expiry)).toBe(0)
        expect(await store.transition(record.id, ['working'], 'completed', {}, expiry)).toBeNull()
      })

      it('a task with ttlMs null never expires', async () => {
        const record = await created({ ttlMs: null })
        const farFuture = T0 + 100 * 365 * 24 * 3600_000
        expect(await store.get(record.id, farFuture)).toEqual(record)
        expect(await store.countActive(record.principal, farFuture)).toBe(1)
        expect(await store.sweep(farFuture)).toBe(0)
        expect(await store.get(record.id, farFuture)).toEqual(record)
      })

      it('sweep() deletes exactly the expired tasks, with their inputs', async () => {
        const expired = await created({ ttlMs: 1_000 })
        const fresh = await created({ ttlMs: 10_000 })
        const forever = await created({ ttlMs: null })
        const oldInput = input(expired)
        const freshInput = input(fresh)
        await store.addInput(oldInput, 5)
        await store.addInput(freshInput, 5)

        expect(await store.sweep(T0 + 1_000)).toBe(1)
        expect(await store.sweep(T0 + 1_000)).toBe(0)
        expect(await store.getInput(oldInput.key)).toBeNull()
        expect(await store.pendingInputs(expired.id)).toEqual([])
        expect(await store.getInput(freshInput.key)).toEqual(freshInput)
        expect(await store.get(fresh.id, T0)).toEqual(fresh)
        expect(await store.get(forever.id, T0)).toEqual(forever)
        // Gone for good: not even an earlier `now` brings it back.
        expect(await store.get(expired.id, T0)).toBeNull()
      })
    })

    describe('listing', () => {
      it('lists only the tasks of the principal, by createdAt then id', async () => {
        const principal = `principal:${randomUUID()}`
        const mine = [
          await created({ principal, id: 'b', createdAt: T0 + 20 }),
          await created({ principal, id: 'c', createdAt: T0 + 10 }),
          await created({ principal, id: 'a', createdAt: T0 + 20 }),
          await created({ principal, id: 'z', createdAt: T0 }),
        ]
        await created({ id: 'other', createdAt: T0 + 15 })
        const listed = await store.list(principal, undefined, 100, T0)
        expect(listed.map((t) => t.id)).toEqual(['z', 'c', 'a', 'b'])
        expect(listed).toEqual(expect.arrayContaining(mine))
      })

      it('pages through many tasks with a cursor, without duplicates or gaps', async () => {
        const principal = `principal:${randomUUID()}`
        const all: TaskRecord[] = []
        for (let i = 0; i < 23; i++) {
          // Several tasks share a createdAt, so the id must break ties.
          all.push(await created({ principal, createdAt: T0 + Math.floor(i / 4) }))
        }
        all.sort((x, y) => x.createdAt - y.createdAt || (x.id < y.id ? -1 : 1))

        const seen: TaskRecord[] = []
        const sizes: number[] = []
        let cursor: { createdAt: number, id: string } | undefined
        // Bounded, so that a cursor that does not advance fails instead of looping.
        for (let pages = 0; pages < 10; pages++) {
          const page = await store.list(principal, cursor, 5, T0)
          sizes.push(page.length)
          if (page.length === 0) break
          seen.push(...page)
          const last = page[page.length - 1]!
          cursor = { createdAt: last.createdAt, id: last.id }
        }
        expect(sizes).toEqual([5, 5, 5, 5, 3, 0])
        expect(seen).toEqual(all)
      })

      it('a cursor is a position: it need not name an existing task', async () => {
        const principal = `principal:${randomUUID()}`
        await created({ principal, id: 'a', createdAt: T0 })
        await created({ principal, id: 'c', createdAt: T0 })
        await created({ principal, id: 'b', createdAt: T0 + 1 })
        const after = await store.list(principal, { createdAt: T0, id: 'b' }, 10, T0)
        expect(after.map((t) => t.id)).toEqual(['c', 'b'])
      })

      it('countActive() counts the live, unfinished tasks of one principal', async () => {
        const principal = `principal:${randomUUID()}`
        await created({ principal })
        const asking = await created({ principal })
        await store.transition(asking.id, ['working'], 'input_required', {}, T0)
        for (const end of ['completed', 'failed', 'cancelled'] as const) {
          const ended = await created({ principal })
          await store.transition(ended.id, sourcesOf(end), end, {}, T0)
        }
        await created({ principal, ttlMs: 10 })
        await created()
        expect(await store.countActive(principal, T0 + 10)).toBe(2)
        expect(await store.countActive(`principal:${randomUUID()}`, T0)).toBe(0)
      })

      it('countActive() stops counting at atMost, which is all a limit check needs', async () => {
        const principal = `principal:${randomUUID()}`
        for (let i = 0; i < 5; i++) await created({ principal })
        expect(await store.countActive(principal, T0, 3)).toBe(3)
        expect(await store.countActive(principal, T0, 10)).toBe(5)
      })

      it('unfinished() returns every working or input_required task', async () => {
        const working = await created()
        const asking = await created()
        const askingNow = await store.transition(asking.id, ['working'], 'input_required', {}, T0 + 1)
        const done = await created()
        await store.transition(done.id, ['working'], 'completed', { outcome: completed }, T0 + 1)
        const unfinished = await store.unfinished()
        expect(unfinished).toHaveLength(2)
        expect(unfinished).toEqual(expect.arrayContaining([working, askingNow]))
      })
    })
  })
}
