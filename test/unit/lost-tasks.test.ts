import { describe, expect, it } from 'vitest'
import { pino } from 'pino'
import { Writable } from 'node:stream'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import { BUS, subscribeTo } from '../../src/store/bus-channels.ts'
import type { DataLossWatch, StoreLoss } from '../../src/store/data-loss.ts'
import type { TaskRecord } from '../../src/store/types.ts'
import type { TaskEvents } from '../../src/tasks/task-events.ts'
import { LostTasks } from '../../src/tasks/lost-tasks.ts'
import { task } from '../contract/task-records.ts'

/** A store watch the test drives: `lose` reports a loss, `check` counts the checks asked for. */
function fakeWatch (): DataLossWatch & { lose (loss: StoreLoss): void, checks: number } {
  const listeners = new Set<(loss: StoreLoss) => void>()
  const watch = {
    checks: 0,
    onLoss (listener: (loss: StoreLoss) => void) {
      listeners.add(listener)
      return () => { listeners.delete(listener) }
    },
    async check () { watch.checks++ },
    lose (loss: StoreLoss) { for (const l of listeners) l(loss) },
  }
  return watch
}

interface Setup {
  lost: LostTasks
  watch: ReturnType<typeof fakeWatch>
  shown: TaskRecord[]
  logs: Array<Record<string, unknown>>
  store: MemoryStore
}

function setup (running: TaskRecord[] = []): Setup {
  const store = new MemoryStore()
  const watch = fakeWatch()
  const shown: TaskRecord[] = []
  const logs: Array<Record<string, unknown>> = []
  const sink = new Writable({ write (chunk, _enc, done) { logs.push(JSON.parse(String(chunk)) as Record<string, unknown>); done() } })
  const lost = new LostTasks({
    watch,
    running: () => running,
    events: { status: (t: TaskRecord) => { shown.push(t) } } as unknown as TaskEvents,
    bus: store.bus,
    log: pino({ level: 'info' }, sink),
  })
  return { lost, watch, shown, logs, store }
}

describe('the tasks a store lost', () => {
  it('answers lost-by-the-store for a task this process knew, only to its principal, and not-found for others', async () => {
    const { lost, watch } = setup()
    const known = task({ principal: 'alice' })
    lost.remember(known)
    watch.lose({ at: Date.now(), reason: 'Redis was emptied (FLUSHALL)' })
    const error = await lost.lostError(known.id, 'alice')
    expect(error?.code).toBe('GW_ERR_TASK_LOST_BY_STORE')
    expect(error?.message).toContain(known.id)
    expect(error?.message).toContain('Redis was emptied (FLUSHALL)')
    // Another principal learns nothing about the id; an id never known stays unknown.
    expect(await lost.lostError(known.id, 'bob')).toBeUndefined()
    expect(await lost.lostError('never-seen', 'alice')).toBeUndefined()
  })

  it('asks the store to check itself when a known task is missing, and forgets it when no loss is found (it expired)', async () => {
    const { lost, watch } = setup()
    const known = task({ principal: 'alice' })
    lost.remember(known)
    expect(await lost.lostError(known.id, 'alice')).toBeUndefined()
    expect(watch.checks).toBe(1)
    // Forgotten: a later loss does not count it, and no second check is asked for it.
    watch.lose({ at: Date.now(), reason: 'emptied' })
    expect(await lost.lostError(known.id, 'alice')).toBeUndefined()
    expect(watch.checks).toBe(1)
  })

  it('logs the loss once with how many tasks it knew, shows running tasks failed, and wakes waiters of the others', async () => {
    const running = task({ principal: 'alice' })
    const elsewhere = task({ principal: 'bob' })
    const { lost, watch, shown, logs, store } = setup([running])
    lost.remember(elsewhere)
    const woken: unknown[] = []
    const unsubscribe = subscribeTo(store.bus, BUS.task, elsewhere.id, (message) => { woken.push(message) })
    watch.lose({ at: Date.now(), reason: 'Redis restarted without persistence' })
    const errors = logs.filter((l) => l.level === 50)
    expect(errors).toHaveLength(1)
    expect(errors[0]).toMatchObject({ lostTasks: 2, runningHere: 1 })
    expect(errors[0]!.taskIds).toEqual(expect.arrayContaining([running.id, elsewhere.id]))
    expect(shown).toHaveLength(1)
    expect(shown[0]).toMatchObject({ id: running.id, status: 'failed' })
    expect(shown[0]!.statusMessage).toMatch(/lost by the store: Redis restarted without persistence/)
    await expect.poll(() => woken).toEqual([{ type: 'status', status: 'failed' }])
    unsubscribe()
  })

  it('a task remembered again after the loss (created anew on the emptied store) is no longer lost', async () => {
    const { lost, watch } = setup()
    const known = task({ principal: 'alice' })
    lost.remember(known)
    watch.lose({ at: Date.now(), reason: 'emptied' })
    lost.remember(known)
    expect(await lost.lostError(known.id, 'alice')).toBeUndefined()
  })

  it('remembers nothing where the store cannot lose its data (no watch)', async () => {
    const store = new MemoryStore()
    const lost = new LostTasks({ watch: undefined, running: () => [], events: {} as TaskEvents, bus: store.bus, log: pino({ level: 'silent' }) })
    const known = task({ principal: 'alice' })
    lost.remember(known)
    expect(await lost.lostError(known.id, 'alice')).toBeUndefined()
  })
})
