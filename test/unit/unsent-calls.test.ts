import { describe, expect, it } from 'vitest'
import { pino } from 'pino'
import type { CallEngine, CallOrigin } from '../../src/calls/call-engine.ts'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import type { TaskRecord } from '../../src/store/types.ts'
import type { TaskEvents } from '../../src/tasks/task-events.ts'
import type { TaskInputs } from '../../src/tasks/task-inputs.ts'
import { TaskRunner } from '../../src/tasks/task-runner.ts'
import type { Upstream } from '../../src/upstream/upstream.ts'
import { task } from '../contract/task-records.ts'
import { until } from '../helpers/until.ts'

const upstream = { name: 'demo', config: { toolSettings: {}, resume: 'auto', transport: 'streamable-http' } } as unknown as Upstream

/**
 * A task runner over the memory store whose call engine makes every call wait for a slot, runs `between` once the
 * store shows the task waiting, then tells the runner the call is sent; `sent` lists what the store held for each
 * call that went upstream, as it went.
 */
function runner (store: MemoryStore, id: string, between: () => Promise<void>): { runner: TaskRunner, sent: Array<TaskRecord | null> } {
  const sent: Array<TaskRecord | null> = []
  const calls = {
    run: async (_target: unknown, _params: unknown, origin: CallOrigin) => {
      origin.queued?.('maxConcurrentCalls')
      await until('the task shown waiting', async () => (await store.tasks.get(id, Date.now()))?.statusMessage?.startsWith('queued') === true ? true : undefined)
      await between()
      await origin.sent?.()
      sent.push(await store.tasks.get(id, Date.now()))
      return { content: [{ type: 'text', text: 'done' }] }
    },
  } as unknown as CallEngine
  const events = { status: () => {}, progress: () => {}, notification: () => {} } as unknown as TaskEvents
  const inputs = { expireAll: async () => {} } as unknown as TaskInputs
  const taskRunner = new TaskRunner({
    store: store.tasks,
    upstreams: { upstream: () => upstream },
    calls,
    inputs,
    events,
    log: pino({ level: 'silent' }),
    shutdown: new AbortController().signal,
    bus: store.bus,
    nativeTaskSupport: () => undefined,
    maxResultBytes: 1_000_000,
  })
  return { runner: taskRunner, sent }
}

describe('a task call that waits for a call slot', () => {
  it('is marked unsent in the store while it waits, and the mark is gone before the call is sent', async () => {
    const store = new MemoryStore()
    const record = task({ owner: 'a', createdAt: Date.now(), lastUpdatedAt: Date.now() })
    await store.tasks.create(record)
    let waiting: TaskRecord | null = null
    const { runner: a, sent } = runner(store, record.id, async () => { waiting = await store.tasks.get(record.id, Date.now()) })
    a.start(record)
    await until('the task completed', async () => (await store.tasks.get(record.id, Date.now()))?.status === 'completed' ? true : undefined)
    expect(waiting).toMatchObject({ statusMessage: "queued: upstream 'demo' already runs its maxConcurrentCalls calls", resume: { kind: 'unsent' } })
    expect(sent).toHaveLength(1)
    expect(sent[0]).toMatchObject({ statusMessage: null, resume: null })
  })

  it('is not sent by a process declared lost once another process claimed the task unsent', async () => {
    const store = new MemoryStore()
    const record = task({ owner: 'a', createdAt: Date.now(), lastUpdatedAt: Date.now() })
    await store.tasks.create(record)
    let claimed: TaskRecord | null = null
    const { runner: a, sent } = runner(store, record.id, async () => { claimed = await store.tasks.claim(record.id, 'a', 'b', Date.now()) })
    a.start(record)
    await until('the run ended', () => a.size === 0 ? true : undefined)
    expect(claimed).toMatchObject({ owner: 'b', resume: { kind: 'unsent' } })
    expect(sent).toEqual([])
    expect(await store.tasks.get(record.id, Date.now())).toMatchObject({ status: 'working', owner: 'b' })
  })
})
