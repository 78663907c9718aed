// The poll interval the gateway suggests grows with a running task's age (a tenth of it, whole seconds) from
// tasks.pollInterval up to tasks.pollIntervalMax, so that clients poll long tasks less often (src/tasks/poll-interval.ts),
// and tasks/get and tasks/list show it (src/tasks/task-service.ts) while the store keeps the interval of the creation.
import { describe, expect, it } from 'vitest'
import { pino } from 'pino'
import type { CallEngine } from '../../src/calls/call-engine.ts'
import { parseConfig } from '../../src/config/load.ts'
import type { TasksConfig } from '../../src/config/schema.ts'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import type { TaskStatus } from '../../src/wire/task-state.ts'
import { suggestedPollInterval } from '../../src/tasks/poll-interval.ts'
import { TaskInputs } from '../../src/tasks/task-inputs.ts'
import { TaskRunner } from '../../src/tasks/task-runner.ts'
import { TaskService } from '../../src/tasks/task-service.ts'
import { task } from '../contract/task-records.ts'

const SECOND = 1000
const log = pino({ level: 'silent' })
const ignore = (): void => {}
const events = { status: ignore, input: ignore, inputSettled: ignore, progress: ignore, notification: ignore }

function running (status: TaskStatus = 'working'): { createdAt: number, pollIntervalMs: number, status: TaskStatus } {
  return { createdAt: 0, pollIntervalMs: SECOND, status }
}

function serviceOf (store: MemoryStore, config: TasksConfig): TaskService {
  const inputs = new TaskInputs({ store: store.tasks, events, config, bus: store.bus, processId: 'a', log })
  const runner = new TaskRunner({
    store: store.tasks,
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
  return new TaskService({ store: store.tasks, runner, inputs, events, config, log, bus: store.bus, owner: 'a', isIdempotent: () => false, canResume: () => false })
}

function tasksConfig (tasks: Record<string, unknown>): TasksConfig {
  return parseConfig({ upstreams: [{ name: 'demo', transport: 'streamable-http', url: 'http://127.0.0.1:1/mcp' }], tasks }, {}, 'test').tasks
}

describe('suggested poll interval', () => {
  it('is tasks.pollInterval while a tenth of the task\'s age is shorter', () => {
    expect(suggestedPollInterval(running(), 0, 30 * SECOND)).toBe(SECOND)
    expect(suggestedPollInterval(running(), 19_999, 30 * SECOND)).toBe(SECOND)
  })

  it('grows to a tenth of the age in whole seconds, up to tasks.pollIntervalMax', () => {
    expect(suggestedPollInterval(running(), 25_700, 30 * SECOND)).toBe(2 * SECOND)
    expect(suggestedPollInterval(running(), 60 * SECOND, 30 * SECOND)).toBe(6 * SECOND)
    expect(suggestedPollInterval(running(), 3600 * SECOND, 30 * SECOND)).toBe(30 * SECOND)
  })

  it('stays fixed when tasks.pollIntervalMax is not above tasks.pollInterval, and for a terminal task', () => {
    expect(suggestedPollInterval(running(), 3600 * SECOND, SECOND)).toBe(SECOND)
    expect(suggestedPollInterval(running(), 3600 * SECOND, SECOND / 2)).toBe(SECOND)
    expect(suggestedPollInterval(running('completed'), 3600 * SECOND, 30 * SECOND)).toBe(SECOND)
  })

  it('is what tasks/get and tasks/list show of a task running for two minutes; the store keeps the interval it was created with', async () => {
    const store = new MemoryStore()
    const old = task({ principal: 'alice', createdAt: Date.now() - 120 * SECOND, pollIntervalMs: SECOND, ttlMs: 3600 * SECOND })
    const young = task({ principal: 'alice', createdAt: Date.now(), pollIntervalMs: SECOND, ttlMs: 3600 * SECOND })
    await store.tasks.create(old)
    await store.tasks.create(young)
    const service = serviceOf(store, tasksConfig({ pollInterval: '1s', pollIntervalMax: '30s' }))
    expect((await service.get('alice', old.id)).pollIntervalMs).toBe(12 * SECOND)
    expect((await service.get('alice', young.id)).pollIntervalMs).toBe(SECOND)
    expect((await service.list('alice', undefined, 10)).map((t) => [t.id, t.pollIntervalMs])).toEqual([[old.id, 12 * SECOND], [young.id, SECOND]])
    expect((await store.tasks.get(old.id, Date.now()))!.pollIntervalMs).toBe(SECOND)
  })

  it('defaults to growing up to 30 s; pollIntervalMax: pollInterval keeps every task at tasks.pollInterval', async () => {
    expect(tasksConfig({}).pollIntervalMax).toBe(30 * SECOND)
    const store = new MemoryStore()
    const old = task({ principal: 'alice', createdAt: Date.now() - 120 * SECOND, pollIntervalMs: SECOND, ttlMs: 3600 * SECOND })
    await store.tasks.create(old)
    const service = serviceOf(store, tasksConfig({ pollInterval: '1s', pollIntervalMax: '1s' }))
    expect((await service.get('alice', old.id)).pollIntervalMs).toBe(SECOND)
  })
})
