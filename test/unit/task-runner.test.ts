// The task runner and service as the gateway wires them, over the memory store, with the upstream side driven by
// hand: what a client sees of a task (its status, outcome, owner, statusMessage) when a cancel races its completion,
// when its process hands it over at shutdown, when the store is down as its outcome arrives, and when another process
// takes over a task whose call was still waiting for a call slot.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { GatewayError } from '../../src/errors.ts'
import { BUS, subscribeTo } from '../../src/store/bus-channels.ts'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import type { TaskRecord, TaskStore } from '../../src/store/types.ts'
import { handoverOwner } from '../../src/tasks/task-service.ts'
import { isTerminal } from '../../src/wire/task-state.ts'
import { DONE, engine, taskRequest } from '../helpers/heart.ts'

const ADDRESS = { sessionId: 'upstream-session-1', protocolVersion: '2025-11-25', era: '2025-11-25' } as const

async function stored (store: MemoryStore, id: string): Promise<TaskRecord> {
  const task = await store.tasks.get(id, Date.now())
  if (task === null) throw new Error(`task ${id} is not stored`)
  return task
}

async function turns (n: number): Promise<void> {
  for (let i = 0; i < n; i++) await Promise.resolve()
}

function codeOf (reason: unknown): string | undefined {
  return reason instanceof GatewayError ? reason.code : undefined
}

describe('a cancel racing the completion of a task', () => {
  it('ends the task exactly once, whichever lands first, and the loser changes nothing', async () => {
    const winners = new Set<string>()
    // Every interleaving of the two: the cancel asked well before the outcome arrives, through to well after.
    for (let offset = -12; offset <= 12; offset++) {
      const store = new MemoryStore()
      const a = engine({ store: store.tasks, bus: store.bus, processId: 'a' })
      const task = await a.service.create(taskRequest(a.upstream))
      const call = await a.calls.next()
      const cancelTask = async (): Promise<string | undefined> =>
        await a.service.cancel('alice', task.id).then((t) => t.status, (err: unknown) => codeOf(err))
      // The first of the two starts, then `offset` turns of the microtask queue pass, then the other starts.
      let cancel: string | undefined
      if (offset < 0) {
        const cancelling = cancelTask()
        await turns(-offset)
        call.resolve(DONE)
        cancel = await cancelling
      } else {
        call.resolve(DONE)
        await turns(offset)
        cancel = await cancelTask()
      }
      await a.runner.settled()

      const final = await stored(store, task.id)
      const terminal = a.events.statuses.filter((t) => isTerminal(t.status))
      expect(terminal.map((t) => t.status)).toEqual([final.status])
      if (final.status === 'cancelled') {
        expect(cancel).toBe('cancelled')
        expect(final.outcome).toBeNull()
      } else {
        expect(final).toMatchObject({ status: 'completed', outcome: { result: DONE } })
        expect(cancel).toBe('GW_ERR_TASK_TERMINAL')
      }
      winners.add(final.status)
    }
    // Both orders were seen: the test covers the cancel winning and the outcome winning.
    expect([...winners].sort()).toEqual(['cancelled', 'completed'])
  })

  it('drops an outcome that arrives after another process cancelled the task', async () => {
    const store = new MemoryStore()
    const a = engine({ store: store.tasks, bus: store.bus, processId: 'a' })
    // Process b shares the store, but its cancel signal never reaches a (a lost bus message).
    const b = engine({ store: store.tasks, bus: new MemoryStore().bus, processId: 'b' })
    const task = await a.service.create(taskRequest(a.upstream))
    const call = await a.calls.next()
    const cancelled = await b.service.cancel('alice', task.id)
    call.resolve(DONE)
    await a.runner.settled()
    expect(cancelled.status).toBe('cancelled')
    expect(await stored(store, task.id)).toMatchObject({ status: 'cancelled', outcome: null, statusMessage: 'cancelled by the client' })
    expect(a.events.statuses.filter((t) => isTerminal(t.status))).toEqual([])
  })
})

describe('a handover at shutdown', () => {
  it('leaves a task whose upstream task is recorded to another process, which waits for the same upstream task', async () => {
    const store = new MemoryStore()
    const a = engine({ store: store.tasks, bus: store.bus, processId: 'a' })
    const resumable = await a.service.create(taskRequest(a.upstream))
    const resumableCall = await a.calls.next()
    await resumableCall.origin.upstreamTask?.created?.('upstream-task-1', ADDRESS)
    const plain = await a.service.create(taskRequest(a.upstream))
    const plainCall = await a.calls.next()

    const handed = await a.runner.handOver((_task, canResume) => canResume)
    expect(handed.map((t) => t.id)).toEqual([resumable.id])
    expect(await a.service.handOver(handed, handoverOwner('a'))).toBe(1)
    await resumableCall.settled
    expect(codeOf(resumableCall.origin.signal.reason)).toBe('GW_ERR_TASK_HANDED_OVER')
    expect(await stored(store, resumable.id)).toMatchObject({ status: 'working', owner: 'a~handover', outcome: null })
    // The task that cannot be resumed elsewhere runs on here to its end.
    expect(plainCall.origin.signal.aborted).toBe(false)
    plainCall.resolve(DONE)

    const b = engine({ store: store.tasks, bus: store.bus, processId: 'b' })
    expect(await b.service.adoptOrphans(handoverOwner('a'))).toEqual({ resumed: 1, rerun: 0, started: 0, failed: 0 })
    const resumed = await b.calls.next()
    expect(resumed.origin.upstreamTask?.existing).toEqual({ kind: 'native', upstreamTaskId: 'upstream-task-1', ...ADDRESS })
    resumed.resolve(DONE)
    await Promise.all([a.runner.settled(), b.runner.settled()])
    expect(await stored(store, resumable.id)).toMatchObject({ status: 'completed', owner: 'b', outcome: { result: DONE } })
    expect(await stored(store, plain.id)).toMatchObject({ status: 'completed', owner: 'a', outcome: { result: DONE } })
    expect(a.events.statuses.filter((t) => t.id === resumable.id && isTerminal(t.status))).toEqual([])
  })
})

describe('the end of a task\'s time', () => {
  afterEach(() => { vi.useRealTimers() })

  it('fails a task still running when the gateway gives up on running work at shutdown, saying so', async () => {
    const store = new MemoryStore()
    const a = engine({ store: store.tasks, bus: store.bus, processId: 'a' })
    const task = await a.service.create(taskRequest(a.upstream))
    const call = await a.calls.next()
    a.shutdown.abort(new GatewayError('GW_ERR_SHUTTING_DOWN'))
    await a.runner.settled()
    expect(codeOf(call.origin.signal.reason)).toBe('GW_ERR_SHUTTING_DOWN')
    const failed = await stored(store, task.id)
    expect(failed.status).toBe('failed')
    expect(JSON.stringify(failed.outcome)).toContain('GW_ERR_SHUTTING_DOWN')
  })

  it('stops the upstream call of a task that reached its TTL', async () => {
    vi.useFakeTimers()
    const store = new MemoryStore()
    const a = engine({ store: store.tasks, bus: store.bus, processId: 'a' })
    await a.service.create({ ...taskRequest(a.upstream), requestedTtl: 5000 })
    const call = await a.calls.next()
    await vi.advanceTimersByTimeAsync(4999)
    expect(call.origin.signal.aborted).toBe(false)
    await vi.advanceTimersByTimeAsync(1)
    expect(codeOf(call.origin.signal.reason)).toBe('GW_ERR_REQUEST_CANCELLED')
    await a.runner.settled()
    expect(a.runner.size).toBe(0)
  })
})

/** The memory store's tasks, whose writes fail as an unreachable Redis's do while `down.now`; `refused` resolves at the first refusal. */
function outage (store: MemoryStore): { tasks: TaskStore, down: { now: boolean }, refused: Promise<void> } {
  const down = { now: false }
  let refusedOnce!: () => void
  const refused = new Promise<void>((resolve) => { refusedOnce = resolve })
  const tasks = new Proxy(store.tasks, {
    get (target, property) {
      const value = Reflect.get(target, property, target) as unknown
      if (typeof value !== 'function') return value
      return async (...args: unknown[]) => {
        if (down.now && property !== 'create') {
          refusedOnce()
          throw new GatewayError('GW_ERR_STORE_UNAVAILABLE', ['Redis is unreachable'])
        }
        return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args)
      }
    },
  })
  return { tasks, down, refused }
}

describe('a store outage as a task ends', () => {
  afterEach(() => { vi.useRealTimers() })

  it('stores the outcome once the store is back, and the client then sees the task completed', async () => {
    vi.useFakeTimers()
    const store = new MemoryStore()
    const { tasks, down, refused } = outage(store)
    const a = engine({ store: tasks, bus: store.bus, processId: 'a' })
    const task = await a.service.create(taskRequest(a.upstream))
    const call = await a.calls.next()
    down.now = true
    call.resolve(DONE)
    await refused
    expect(await stored(store, task.id)).toMatchObject({ status: 'working', outcome: null })
    down.now = false
    await vi.advanceTimersByTimeAsync(100)
    const completed = await a.events.status$((t) => t.status === 'completed')
    expect(completed.outcome).toEqual({ result: DONE })
    await a.runner.settled()
    expect(await stored(store, task.id)).toMatchObject({ status: 'completed', outcome: { result: DONE } })
  })

  it('keeps trying through a long outage, at least every 5 s, and stores the outcome once the store is back', async () => {
    vi.useFakeTimers()
    const store = new MemoryStore()
    const { tasks, down, refused } = outage(store)
    const a = engine({ store: tasks, bus: store.bus, processId: 'a' })
    const task = await a.service.create(taskRequest(a.upstream))
    const call = await a.calls.next()
    down.now = true
    call.resolve(DONE)
    await refused
    await vi.advanceTimersByTimeAsync(10 * 60_000)
    expect(await stored(store, task.id)).toMatchObject({ status: 'working', outcome: null })
    down.now = false
    await vi.advanceTimersByTimeAsync(5000)
    expect(await stored(store, task.id)).toMatchObject({ status: 'completed', outcome: { result: DONE } })
    await a.runner.settled()
  })
})

describe('a takeover of a task whose call waited for a call slot', () => {
  it('starts the call on the process that took it over, and the lost process does not send it', async () => {
    const store = new MemoryStore()
    const a = engine({ store: store.tasks, bus: store.bus, processId: 'a' })
    const task = await a.service.create(taskRequest(a.upstream))
    const waiting = await a.calls.next()
    waiting.origin.queued?.('maxConcurrentCalls')
    await a.events.status$((t) => t.statusMessage?.startsWith('queued') === true)
    expect(await stored(store, task.id)).toMatchObject({ resume: { kind: 'unsent' } })
    const cancels: unknown[] = []
    subscribeTo(store.bus, BUS.taskCancel, task.id, (message) => cancels.push(message))

    const b = engine({ store: store.tasks, bus: store.bus, processId: 'b' })
    expect(await b.service.adoptOrphans('a')).toEqual({ resumed: 0, rerun: 0, started: 1, failed: 0 })
    // The lost process, should it wake up, is told to drop the call: it never sends it.
    expect(cancels).toEqual([{ taskId: task.id }])
    await waiting.settled
    await expect(Promise.resolve(waiting.origin.sent?.())).rejects.toThrow()
    const started = await b.calls.next()
    expect(started.origin.upstreamTask?.existing).toBeUndefined()
    expect(await stored(store, task.id)).toMatchObject({
      status: 'working',
      owner: 'b',
      resume: null,
      statusMessage: 'started after the gateway process it waited in was lost: its call had not been sent upstream',
    })
    started.resolve(DONE)
    await Promise.all([a.runner.settled(), b.runner.settled()])
    expect(await stored(store, task.id)).toMatchObject({ status: 'completed', owner: 'b', outcome: { result: DONE } })
  })

  it('fails a task whose call had been sent, when its tool may not run twice', async () => {
    const store = new MemoryStore()
    const a = engine({ store: store.tasks, bus: store.bus, processId: 'a' })
    const task = await a.service.create(taskRequest(a.upstream))
    await a.calls.next()
    const b = engine({ store: store.tasks, bus: store.bus, processId: 'b' })
    expect(await b.service.adoptOrphans('a')).toEqual({ resumed: 0, rerun: 0, started: 0, failed: 1 })
    await a.runner.settled()
    const failed = await stored(store, task.id)
    expect(failed).toMatchObject({ status: 'failed', owner: 'b' })
    expect(JSON.stringify(failed.outcome)).toContain('GW_ERR_TASK_OWNER_LOST')
    expect(b.calls.made).toEqual([])
  })

  it('runs a task whose call had been sent again, when its tool is idempotent', async () => {
    const store = new MemoryStore()
    const a = engine({ store: store.tasks, bus: store.bus, processId: 'a' })
    const task = await a.service.create(taskRequest(a.upstream))
    await a.calls.next()
    const b = engine({ store: store.tasks, bus: store.bus, processId: 'b', idempotent: true })
    expect(await b.service.adoptOrphans('a')).toEqual({ resumed: 0, rerun: 1, started: 0, failed: 0 })
    ;(await b.calls.next()).resolve(DONE)
    await Promise.all([a.runner.settled(), b.runner.settled()])
    expect(await stored(store, task.id)).toMatchObject({ status: 'completed', owner: 'b', statusMessage: null })
  })
})
