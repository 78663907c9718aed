import { describe, expect, it } from 'vitest'
import { pino } from 'pino'
import type { CallEngine, CallOrigin } from '../../src/calls/call-engine.ts'
import type { TasksConfig } from '../../src/config/schema.ts'
import { GatewayError } from '../../src/errors.ts'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import type { TaskRecord } from '../../src/store/types.ts'
import type { TaskEvents } from '../../src/tasks/task-events.ts'
import { TaskInputs } from '../../src/tasks/task-inputs.ts'
import { TaskRunner } from '../../src/tasks/task-runner.ts'
import type { Upstream } from '../../src/upstream/upstream.ts'
import { task } from '../contract/task-records.ts'
import { until } from '../helpers/until.ts'

const upstream = { name: 'demo', config: { toolSettings: {}, resume: 'auto', transport: 'streamable-http' } } as unknown as Upstream
const ignore = (): void => {}
const events = { status: ignore, input: ignore, inputSettled: ignore, progress: ignore, notification: ignore } as unknown as TaskEvents
const config = { maxQueuedInputs: 10 } as unknown as TasksConfig

/** What process `b` writes as it takes the task over from `a` (a was paused past its lease). */
async function takeOver (store: MemoryStore, id: string): Promise<TaskRecord | null> {
  await store.tasks.claim(id, 'a', 'b', Date.now())
  return await store.tasks.transition(id, ['working'], 'working', { statusMessage: 'started by b', resume: null, by: 'b', asOwner: 'b' }, Date.now())
}

/** Process `a`'s task runner over `store`, whose one call runs `call` (told whether the call was sent upstream). */
function runnerOf (store: MemoryStore, call: (origin: CallOrigin) => Promise<void>): { runner: TaskRunner, sent: string[] } {
  const sent: string[] = []
  const calls = {
    run: async (_target: unknown, _params: unknown, origin: CallOrigin) => {
      await call(origin)
      sent.push('tools/call')
      return { content: [{ type: 'text', text: 'the answer of a' }] }
    },
  } as unknown as CallEngine
  const runner = new TaskRunner({
    store: store.tasks,
    upstreams: { upstream: () => upstream },
    calls,
    inputs: new TaskInputs({ store: store.tasks, events, config, bus: store.bus, processId: 'a', log: pino({ level: 'silent' }) }),
    events,
    log: pino({ level: 'silent' }),
    shutdown: new AbortController().signal,
    bus: store.bus,
    nativeTaskSupport: () => undefined,
    maxResultBytes: 1_000_000,
  })
  return { runner, sent }
}

describe('a process paused past its lease, whose task another process took over', () => {
  it('stores nothing when its call ends: the new owner\'s task stays as the new owner wrote it', async () => {
    const store = new MemoryStore()
    const record = task({ owner: 'a', statusMessage: null, createdAt: Date.now(), lastUpdatedAt: Date.now() })
    await store.tasks.create(record)
    let taken: TaskRecord | null = null
    const { runner } = runnerOf(store, async () => { taken = await takeOver(store, record.id) })
    runner.start(record)
    await until('the run ended', () => runner.size === 0 ? true : undefined)
    expect(taken).toMatchObject({ owner: 'b', statusMessage: 'started by b' })
    expect(await store.tasks.get(record.id, Date.now())).toEqual(taken)
  })

  it('does not send a call that waited for a call slot, nor clear what the new owner wrote', async () => {
    const store = new MemoryStore()
    const record = task({ owner: 'a', statusMessage: null, createdAt: Date.now(), lastUpdatedAt: Date.now() })
    await store.tasks.create(record)
    let taken: TaskRecord | null = null
    const { runner, sent } = runnerOf(store, async (origin) => {
      origin.queued?.('maxConcurrentCalls')
      await until('the task shown waiting', async () => (await store.tasks.get(record.id, Date.now()))?.resume?.kind === 'unsent' ? true : undefined)
      taken = await takeOver(store, record.id)
      await origin.sent?.()
    })
    runner.start(record)
    await until('the run ended', () => runner.size === 0 ? true : undefined)
    expect(sent).toEqual([])
    expect(await store.tasks.get(record.id, Date.now())).toEqual(taken)
  })

  it('does not pass the client\'s answer on to the upstream: the new owner does', async () => {
    const store = new MemoryStore()
    const record = task({ owner: 'a', statusMessage: null, createdAt: Date.now(), lastUpdatedAt: Date.now() })
    await store.tasks.create(record)
    const inputs = new TaskInputs({ store: store.tasks, events, config, bus: store.bus, processId: 'a', log: pino({ level: 'silent' }) })
    const asked = inputs.ask(record, 'elicitation/create', { message: 'which one?' }, new AbortController().signal, 7)
    const pending = await until('the question stored', async () => (await store.tasks.pendingInputs(record.id))[0])
    await takeOver(store, record.id)
    expect(await inputs.answer(record.principal, { jsonrpc: '2.0', id: pending.key, result: { action: 'accept' } })).toBe(true)
    await expect(asked).rejects.toMatchObject({ code: 'GW_ERR_TASK_HANDED_OVER' } satisfies Partial<GatewayError>)
    expect(await store.tasks.getInput(pending.key)).toMatchObject({ state: 'answered', answer: { result: { action: 'accept' } } })
  })

  it('refuses a question its upstream asks after the takeover, and the process goes on (no unhandled rejection)', async () => {
    const store = new MemoryStore()
    const record = task({ owner: 'a', statusMessage: null, createdAt: Date.now(), lastUpdatedAt: Date.now() })
    await store.tasks.create(record)
    const taken = await takeOver(store, record.id)
    // A store over the network answers in a later turn of the event loop, as Redis does.
    const remote = new Proxy(store.tasks, {
      get: (target, name, receiver) => {
        const value = Reflect.get(target, name, receiver) as unknown
        if (typeof value !== 'function') return value
        return async (...args: unknown[]) => {
          await new Promise((resolve) => setImmediate(resolve))
          return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args)
        }
      },
    })
    const inputs = new TaskInputs({ store: remote, events, config, bus: store.bus, processId: 'a', log: pino({ level: 'silent' }) })
    await expect(inputs.ask(record, 'elicitation/create', { message: 'which one?' }, new AbortController().signal, 8))
      .rejects.toMatchObject({ code: 'GW_ERR_INPUT_EXPIRED' } satisfies Partial<GatewayError>)
    expect(await store.tasks.get(record.id, Date.now())).toEqual(taken)
  })
})
