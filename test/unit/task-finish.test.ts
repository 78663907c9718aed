// Storing a task's outcome when the store refuses it: retried while refused, and when it still cannot be stored a
// small failure naming the store takes its place, so the task never stays working.
import { describe, expect, it } from 'vitest'
import { pino } from 'pino'
import { GatewayError } from '../../src/errors.ts'
import { MemoryBus } from '../../src/store/memory/memory-bus.ts'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import type { TaskPatch, TaskStore } from '../../src/store/types.ts'
import type { TaskEvents } from '../../src/tasks/task-events.ts'
import type { TaskInputs } from '../../src/tasks/task-inputs.ts'
import { finishTask } from '../../src/tasks/task-finish.ts'
import { task } from '../contract/task-records.ts'
import { until } from '../helpers/until.ts'

const OOM = 'Redis refuses writes (out of memory)'
const RESULT = { content: [{ type: 'text', text: 'x'.repeat(10_000) }] }

/**
 * The memory store's tasks, refusing as a full Redis does: every write while `full`, and a move that stores an
 * outcome larger than `room` bytes always.
 */
function refusing (store: MemoryStore, room: number): { tasks: TaskStore, state: { full: boolean, refused: number } } {
  const state = { full: false, refused: 0 }
  const tasks = new Proxy(store.tasks, {
    get (target, property) {
      const value = Reflect.get(target, property, target) as unknown
      if (property !== 'transition' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value
      return async (...args: unknown[]) => {
        const patch = args[3] as TaskPatch
        const bytes = patch.outcome === undefined ? 0 : JSON.stringify(patch.outcome).length
        if (state.full || bytes > room) {
          state.refused++
          throw new GatewayError('GW_ERR_STORE_UNAVAILABLE', [OOM])
        }
        return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args)
      }
    },
  })
  return { tasks, state }
}

function deps (tasks: TaskStore, shutdown: AbortSignal) {
  return {
    store: tasks,
    log: pino({ level: 'silent' }),
    shutdown,
    inputs: { expireAll: async () => {} } as unknown as TaskInputs,
    events: { status: () => {} } as unknown as TaskEvents,
    bus: new MemoryBus(),
    maxResultBytes: 1_000_000,
  }
}

describe('a task outcome the store refuses', () => {
  it('is stored once the store accepts it again', async () => {
    const store = new MemoryStore()
    const record = task({ owner: 'a', createdAt: Date.now(), lastUpdatedAt: Date.now(), ttlMs: 600_000 })
    await store.tasks.create(record)
    const { tasks, state } = refusing(store, Infinity)
    state.full = true
    const finishing = finishTask(deps(tasks, new AbortController().signal), record, { result: RESULT })
    // Freed after a few refusals (the retries wait 100 ms, 200 ms, …).
    await until('the outcome refused three times', () => state.refused >= 3 ? true : undefined)
    state.full = false
    expect(await finishing).toBe('completed')
    expect(await store.tasks.get(record.id, Date.now())).toMatchObject({ status: 'completed', outcome: { result: RESULT } })
  })

  it('fails the task with a statusMessage naming the store when it is refused for its size while small writes are accepted', async () => {
    const store = new MemoryStore()
    const record = task({ owner: 'a', createdAt: Date.now(), lastUpdatedAt: Date.now(), ttlMs: 600_000 })
    await store.tasks.create(record)
    const { tasks } = refusing(store, 1000)
    expect(await finishTask(deps(tasks, new AbortController().signal), record, { result: RESULT })).toBe('failed')
    const stored = await store.tasks.get(record.id, Date.now())
    expect(stored?.status).toBe('failed')
    expect(stored?.statusMessage).toBe(`the outcome could not be stored: the store is unavailable: ${OOM}; it was refused for its size while smaller writes were accepted`)
    expect(stored?.outcome).toEqual({ error: { code: -32072, message: stored?.statusMessage, data: { code: 'GW_ERR_TASK_OUTCOME_NOT_STORED' } } })
  })

  it('fails the task with a statusMessage naming the store at shutdown, in one small write', async () => {
    const store = new MemoryStore()
    const record = task({ owner: 'a', createdAt: Date.now(), lastUpdatedAt: Date.now(), ttlMs: 600_000 })
    await store.tasks.create(record)
    const { tasks, state } = refusing(store, 1000)
    const shutdown = new AbortController()
    shutdown.abort()
    expect(await finishTask(deps(tasks, shutdown.signal), record, { result: RESULT })).toBe('failed')
    expect(state.refused).toBe(1)
    expect((await store.tasks.get(record.id, Date.now()))?.statusMessage)
      .toBe(`the outcome could not be stored: the store is unavailable: ${OOM}; still so when the gateway shut down`)
  })
})
