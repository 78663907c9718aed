// A task's last write within its principal's budget of stored bytes: an outcome that does not fit fails the task.
import { pino } from 'pino'
import { describe, expect, it } from 'vitest'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import type { TaskEvents } from '../../src/tasks/task-events.ts'
import { storeOutcome } from '../../src/tasks/task-outcome.ts'
import { T0, task } from '../contract/task-records.ts'

const log = pino({ level: 'silent' })

/** The store's tasks, told to task events that hear nothing. */
function moves (store: MemoryStore) {
  return { store: store.tasks, events: { status: () => {} } as unknown as TaskEvents, bus: store.bus, log: pino({ level: 'silent' }) }
}

describe('storeOutcome', () => {
  it('stores an outcome that fits the principal\'s budget', async () => {
    const store = new MemoryStore()
    const running = task({ request: {}, clientCapabilities: {}, ttlMs: null })
    await store.tasks.create(running)
    const outcome = { result: { content: [{ type: 'text', text: 'done' }] } }
    const ended = await storeOutcome(moves(store), running, { status: 'completed', statusMessage: null, outcome }, 1000, log)
    expect(ended).toMatchObject({ status: 'completed', outcome })
  })

  it('fails the task with GW_ERR_STORED_BYTES_LIMIT, naming the option, instead of storing an outcome that does not fit', async () => {
    const store = new MemoryStore()
    const running = task({ request: {}, clientCapabilities: {}, ttlMs: null })
    await store.tasks.create(running)
    const outcome = { result: { content: [{ type: 'text', text: 'y'.repeat(5000) }] } }
    const ended = await storeOutcome(moves(store), running, { status: 'completed', statusMessage: null, outcome }, 1000, log)
    expect(ended).toMatchObject({
      status: 'failed',
      statusMessage: expect.stringContaining('limits.storedBytesPerPrincipal'),
      outcome: { error: { code: -32070, message: expect.stringContaining('limits.storedBytesPerPrincipal') } },
    })
    expect(await store.tasks.get(running.id, T0)).toEqual(ended)
    // The failure itself is small: the principal keeps almost all of its budget.
    expect(await store.tasks.storedBytes(running.principal)).toBeLessThan(1000)
  })
})
