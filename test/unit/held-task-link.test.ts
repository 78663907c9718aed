import { describe, expect, it } from 'vitest'
import { pino } from 'pino'
import type { CallEngine } from '../../src/calls/call-engine.ts'
import { isHandover } from '../../src/errors.ts'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import type { TaskRecord } from '../../src/store/types.ts'
import { HeldTaskLink } from '../../src/tasks/held-task-link.ts'
import type { TaskEvents } from '../../src/tasks/task-events.ts'
import type { TaskInputs } from '../../src/tasks/task-inputs.ts'
import { TaskRunner } from '../../src/tasks/task-runner.ts'
import type { JsonObject } from '../../src/wire/jsonrpc.ts'
import { task } from '../contract/task-records.ts'
import { until } from '../helpers/until.ts'

const ADDRESS = { sessionId: 'upstream-session-1', protocolVersion: '2025-11-25', era: '2025-11-25' } as const

function runnerOn (store: MemoryStore): TaskRunner {
  return new TaskRunner({
    store: store.tasks,
    upstreams: { upstream: () => undefined },
    calls: {} as unknown as CallEngine,
    inputs: { expireAll: async () => {} } as unknown as TaskInputs,
    events: { status: () => {}, progress: () => {}, notification: () => {} } as unknown as TaskEvents,
    log: pino({ level: 'silent' }),
    shutdown: new AbortController().signal,
    bus: store.bus,
    nativeTaskSupport: () => undefined,
    maxResultBytes: 1_000_000,
  })
}

interface RunningCall {
  done: Promise<JsonObject>
  finish (result: JsonObject): void
  cancel (reason: unknown): void
  cancelled: unknown[]
}

/** A running call whose result the test gives; a cancel ends it with its reason, kept in `cancelled`. */
function runningCall (): RunningCall {
  let finish!: (result: JsonObject) => void
  let fail!: (reason: unknown) => void
  const done = new Promise<JsonObject>((resolve, reject) => {
    finish = resolve
    fail = reject
  })
  const cancelled: unknown[] = []
  return {
    done,
    finish,
    cancel: (reason) => {
      cancelled.push(reason)
      fail(reason)
    },
    cancelled,
  }
}

async function stored (store: MemoryStore, record: TaskRecord): Promise<TaskRecord | null> {
  return await store.tasks.get(record.id, Date.now())
}

/**
 * A 2026-07-28 synchronous call that becomes a task (TaskRunner.adopt) after its upstream work was started: where
 * that work runs is recorded as a task's call records it, so that another process can resume the task.
 */
describe('a held call adopted as a task', () => {
  it('has its upstream task recorded before the adoption settles, and is handed over (not cancelled) as resumable', async () => {
    const store = new MemoryStore()
    const record = task({ owner: 'a', createdAt: Date.now(), lastUpdatedAt: Date.now(), statusMessage: null })
    await store.tasks.create(record)
    const link = new HeldTaskLink(true)
    // The upstream created its task while the client still waited for the call.
    await link.hooks.created!('upstream-task-1', ADDRESS)
    const runner = runnerOn(store)
    const call = runningCall()
    await runner.adopt(record, { ...call, link })
    expect((await stored(store, record))?.resume).toEqual({ kind: 'native', upstreamTaskId: 'upstream-task-1', ...ADDRESS })
    const handed = await runner.handOver((_task, resumable) => resumable)
    expect(handed.map((t) => t.id)).toEqual([record.id])
    expect(call.cancelled.map(isHandover)).toEqual([true])
    await until('the run ended', () => runner.size === 0 ? true : undefined)
    expect((await stored(store, record))?.status).toBe('working')
  })

  it('records a stream learnt after the adoption before it stores the task\'s outcome', async () => {
    const store = new MemoryStore()
    const record = task({ owner: 'a', createdAt: Date.now(), lastUpdatedAt: Date.now(), statusMessage: null })
    await store.tasks.create(record)
    // The write of the resume is held until the call has its result: the outcome must still come after it.
    const writes: string[] = []
    const transition = store.tasks.transition.bind(store.tasks)
    let release!: () => void
    const released = new Promise<void>((resolve) => { release = resolve })
    store.tasks.transition = async (...args: Parameters<typeof transition>) => {
      if (args[3].resume != null) await released
      const updated = await transition(...args)
      writes.push(args[3].resume != null ? `resume ${args[3].resume.kind}` : args[2])
      return updated
    }
    const link = new HeldTaskLink(true)
    const runner = runnerOn(store)
    const call = runningCall()
    await runner.adopt(record, { ...call, link })
    link.hooks.streamed!('stream-token-1', ADDRESS)
    call.finish({ content: [{ type: 'text', text: 'done' }] })
    await new Promise((resolve) => setImmediate(resolve))
    release()
    await until('the task completed', async () => (await stored(store, record))?.status === 'completed' ? true : undefined)
    expect(writes).toEqual(['resume stream', 'completed'])
  })
})
