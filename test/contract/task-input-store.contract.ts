import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import type { GatewayStore, TaskOutcome, TaskRecord, TaskStore } from '../../src/store/types.ts'
import { completed, input, T0, task } from './task-records.ts'
import { freshStoreEachTest } from './fresh-store.ts'

/** The behaviour every store must show for the input queues of tasks; runs unchanged against each backend. */
export function taskInputStoreContract (name: string, create: () => Promise<GatewayStore>): void {
  describe(`store contract (task inputs): ${name}`, () => {
    let store: TaskStore
    freshStoreEachTest(create, (opened) => { store = opened.tasks })

    async function created (overrides: Partial<TaskRecord> = {}): Promise<TaskRecord> {
      const record = task(overrides)
      await store.create(record)
      return record
    }

    describe('input queue', () => {
      it('getInput() returns a queued input with every field intact, or null', async () => {
        const record = await created()
        const queued = input(record)
        await store.addInput(queued, 5)
        expect(await store.getInput(queued.key)).toEqual(queued)
        expect(await store.getInput('in-unknown')).toBeNull()
      })

      it('keeps the upstream\'s own id of an input request, a number or a string, through settling', async () => {
        const record = await created()
        const numbered = input(record, { upstreamRequestId: 7 })
        const named = input(record, { upstreamRequestId: 'req-7' })
        await store.addInput(numbered, 5)
        await store.addInput(named, 5)
        expect(await store.getInput(numbered.key)).toEqual(numbered)
        expect((await store.pendingInputs(record.id)).map((each) => each.upstreamRequestId).sort()).toEqual([7, 'req-7'].sort())
        await store.settleInput(named.key, 'answered', completed, T0 + 1)
        expect((await store.getInput(named.key))?.upstreamRequestId).toBe('req-7')
      })

      it('pendingInputs() lists one task\'s pending inputs, oldest first', async () => {
        const record = await created()
        const other = await created()
        const late = input(record, { createdAt: T0 + 300 })
        const early = input(record, { createdAt: T0 + 100 })
        const middle = input(record, { createdAt: T0 + 200, method: 'sampling/createMessage' })
        const sameTime = input(record, { createdAt: T0 + 200, method: 'roots/list', params: {} })
        for (const each of [late, early, middle, sameTime]) await store.addInput(each, 10)
        await store.addInput(input(other), 10)
        expect(await store.pendingInputs(record.id)).toEqual([early, middle, sameTime, late])
        expect(await store.pendingInputs(randomUUID())).toEqual([])
      })

      it('refuses more than maxPending pending inputs per task', async () => {
        const record = await created()
        const first = input(record)
        await store.addInput(first, 2)
        await store.addInput(input(record), 2)
        const third = input(record)
        await expect(store.addInput(third, 2)).rejects.toMatchObject({ code: 'GW_ERR_TASK_INPUT_LIMIT' })
        expect(await store.getInput(third.key)).toBeNull()
        expect(await store.pendingInputs(record.id)).toHaveLength(2)

        // Another task has its own queue; an answered input frees a slot.
        await store.addInput(input(await created()), 2)
        await store.settleInput(first.key, 'answered', completed)
        await store.addInput(third, 2)
        expect(await store.pendingInputs(record.id)).toHaveLength(2)
      })

      it('inputsOf() lists every input of one task, pending, answered and expired, oldest first, with answers', async () => {
        const record = await created()
        const other = await created()
        const late = input(record, { createdAt: T0 + 300 })
        const early = input(record, { createdAt: T0 + 100 })
        const sameTime = input(record, { createdAt: T0 + 200, method: 'roots/list', params: {} })
        const middle = input(record, { createdAt: T0 + 200, method: 'sampling/createMessage' })
        for (const each of [late, early, sameTime, middle]) await store.addInput(each, 10)
        await store.addInput(input(other), 10)
        const answer: TaskOutcome = { result: { action: 'accept', content: { colour: 'teal' } } }
        await store.settleInput(early.key, 'answered', answer)
        await store.settleInput(middle.key, 'expired', null)
        expect(await store.inputsOf(record.id)).toEqual([{ ...early, state: 'answered', answer }, sameTime, { ...middle, state: 'expired' }, late])
        expect(await store.inputsOf(randomUUID())).toEqual([])
      })

      it('refuses an input for an unknown task', async () => {
        await expect(store.addInput(input(task()), 5)).rejects.toMatchObject({ code: 'GW_ERR_TASK_NOT_FOUND' })
      })

      it('settleInput() settles a pending input once and stores the answer verbatim', async () => {
        const record = await created()
        const answered = input(record)
        const expired = input(record)
        await store.addInput(answered, 5)
        await store.addInput(expired, 5)
        const answer: TaskOutcome = { result: { action: 'accept', content: { colour: 'teal' }, _meta: { k: [1, null] } } }

        expect(await store.settleInput(answered.key, 'answered', answer)).toBe(true)
        expect(await store.settleInput(answered.key, 'answered', completed)).toBe(false)
        expect(await store.settleInput(answered.key, 'expired', null)).toBe(false)
        expect(await store.getInput(answered.key)).toEqual({ ...answered, state: 'answered', answer })

        expect(await store.settleInput(expired.key, 'expired', null)).toBe(true)
        expect(await store.getInput(expired.key)).toEqual({ ...expired, state: 'expired', answer: null })

        expect(await store.pendingInputs(record.id)).toEqual([])
        expect(await store.settleInput('in-unknown', 'answered', answer)).toBe(false)
      })

      it('stores a JSON-RPC error answer with its data', async () => {
        const record = await created()
        const queued = input(record)
        await store.addInput(queued, 5)
        const refusal: TaskOutcome = { error: { code: -32600, message: 'user declined', data: { why: ['busy'] } } }
        expect(await store.settleInput(queued.key, 'answered', refusal)).toBe(true)
        expect((await store.getInput(queued.key))?.answer).toEqual(refusal)
      })

      it('of two racing settlements exactly one wins', async () => {
        const record = await created()
        const queued = input(record)
        await store.addInput(queued, 5)
        const results = await Promise.all([
          store.settleInput(queued.key, 'answered', completed),
          store.settleInput(queued.key, 'expired', null),
        ])
        expect(results.filter(Boolean)).toHaveLength(1)
        expect((await store.getInput(queued.key))?.state).toBe(results[0] ? 'answered' : 'expired')
      })
    })
  })
}
