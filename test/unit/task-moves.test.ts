// Every move of a task is told to whoever waits for it, in every era and in every process: the status change and
// its announcement happen in one function (src/tasks/task-moves.ts), and nothing else in src/ moves a task.
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { pino } from 'pino'
import type { CallEngine } from '../../src/calls/call-engine.ts'
import type { TasksConfig } from '../../src/config/schema.ts'
import { GatewayError } from '../../src/errors.ts'
import { BUS, subscribeTo, type PayloadOf } from '../../src/store/bus-channels.ts'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import type { TaskRecord, TaskStore } from '../../src/store/types.ts'
import type { TaskEvents } from '../../src/tasks/task-events.ts'
import { TaskInputs } from '../../src/tasks/task-inputs.ts'
import { TaskRunner } from '../../src/tasks/task-runner.ts'
import { TaskService } from '../../src/tasks/task-service.ts'
import { mirrorStatus } from '../../src/tasks/task-writes.ts'
import { task } from '../contract/task-records.ts'

const SRC = fileURLToPath(new URL('../../src/', import.meta.url))
const config = { maxQueuedInputs: 10 } as unknown as TasksConfig
const log = pino({ level: 'silent' })

/** Task events that record the statuses they are told (what the 2025-11-25 delivery and the admin feed hear). */
function recorder (): { events: TaskEvents, shown: TaskRecord[] } {
  const shown: TaskRecord[] = []
  const ignore = (): void => {}
  const status = (t: TaskRecord): void => { shown.push(t) }
  return { events: { status, input: ignore, inputSettled: ignore, progress: ignore, notification: ignore }, shown }
}

/** What the bus wakes on the task's channel: what a waiting tasks/result or subscriptions/listen hears, in any process. */
function wakeUps (store: MemoryStore, taskId: string): Array<PayloadOf<typeof BUS.task>> {
  const heard: Array<PayloadOf<typeof BUS.task>> = []
  subscribeTo(store.bus, BUS.task, taskId, (payload) => { heard.push(payload) })
  return heard
}

/** The memory store's tasks, unavailable for reading a task's inputs (as a store that went away just after a write). */
function withoutInputs (tasks: TaskStore): TaskStore {
  return new Proxy(tasks, {
    get (target, property) {
      if (property === 'pendingInputs') return async () => { throw new GatewayError('GW_ERR_STORE_UNAVAILABLE', ['the connection was lost']) }
      const value = Reflect.get(target, property, target) as unknown
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}

function serviceOf (tasks: TaskStore, store: MemoryStore, events: TaskEvents): TaskService {
  const inputs = new TaskInputs({ store: tasks, events, config, bus: store.bus, processId: 'a', log })
  const runner = new TaskRunner({
    store: tasks,
    upstreams: { upstream: () => undefined },
    calls: {} as CallEngine,
    inputs,
    events,
    log,
    shutdown: new AbortController().signal,
    bus: store.bus,
    nativeTaskSupport: () => undefined,
    maxResultBytes: 1_000_000,
  })
  return new TaskService({
    store: tasks,
    runner,
    inputs,
    events,
    config,
    log,
    bus: store.bus,
    owner: 'a',
    isIdempotent: () => false,
    canResume: () => false,
  })
}

/** Every .ts file under `dir`. */
function sources (dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => join(entry.parentPath, entry.name))
}

describe('a move of a task', () => {
  it('cancelled is told to its waiters even when what follows the move fails', async () => {
    const store = new MemoryStore()
    const record = task({ principal: 'alice', owner: 'a', createdAt: Date.now(), lastUpdatedAt: Date.now() })
    await store.tasks.create(record)
    const { events, shown } = recorder()
    const heard = wakeUps(store, record.id)
    const service = serviceOf(withoutInputs(store.tasks), store, events)
    // The client is told the store failed; the task is cancelled all the same.
    await expect(service.cancel('alice', record.id)).rejects.toThrow(/store is unavailable/)
    expect(await store.tasks.get(record.id, Date.now())).toMatchObject({ status: 'cancelled' })
    expect(shown.map((t) => t.status)).toEqual(['cancelled'])
    await expect.poll(() => heard).toEqual([{ type: 'status', status: 'cancelled' }])
  })

  it('of a 2026-07-28 task wakes its waiters on the bus, with no 2025-11-25 delivery in between', async () => {
    const store = new MemoryStore()
    const record = task({ era: '2026-07-28', sessionId: null, owner: 'a', createdAt: Date.now(), lastUpdatedAt: Date.now() })
    await store.tasks.create(record)
    const { events, shown } = recorder()
    const heard = wakeUps(store, record.id)
    await mirrorStatus({ store: store.tasks, events, bus: store.bus, log, shutdown: new AbortController().signal }, record, { taskId: 'up-1', status: 'working', statusMessage: 'step 2 of 3' })
    expect(shown.map((t) => t.statusMessage)).toEqual(['step 2 of 3'])
    await expect.poll(() => heard).toEqual([{ type: 'status', status: 'working' }])
  })

  it('is made only by src/tasks/task-moves.ts: no other source file calls the store\'s transition', () => {
    const callers = sources(SRC)
      .map((file) => relative(SRC, file).split('\\').join('/'))
      .filter((file) => !file.startsWith('store/') && file !== 'tasks/task-moves.ts')
      .filter((file) => /\.transition\(/.test(readFileSync(join(SRC, file), 'utf8')))
    expect(callers).toEqual([])
  })
})
