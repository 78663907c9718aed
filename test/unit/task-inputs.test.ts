// What an upstream asks during a task's call waits for the client's answer, which may reach any gateway process:
// two processes share one memory store (and one bus, or two when the signal between them is lost).
import { afterEach, describe, expect, it, vi } from 'vitest'
import { RpcError } from '../../src/errors.ts'
import { MemoryBus } from '../../src/store/memory/memory-bus.ts'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import type { InputRecord } from '../../src/store/types.ts'
import { DONE, engine, taskRequest, type Engine, type PendingCall } from '../helpers/heart.ts'

const ASKED = { message: 'Which colour?', requestedSchema: { type: 'object', properties: { colour: { type: 'string' } } } }
const ACCEPTED = { action: 'accept', content: { colour: 'teal' } }

/** Process a runs a task whose upstream asks the client something; resolves with the call, its pending answer and the stored input. */
async function asking (a: Engine): Promise<{ call: PendingCall, answer: Promise<unknown>, input: InputRecord }> {
  await a.service.create(taskRequest(a.upstream))
  const call = await a.calls.next()
  const answer = call.origin.ask('elicitation/create', ASKED, new AbortController().signal, 7)
  // Kept from rejecting unseen: each test awaits it.
  answer.catch(() => {})
  const input = await new Promise<InputRecord>((resolve) => {
    const check = (): void => { if (a.events.inputs[0] !== undefined) resolve(a.events.inputs[0]) }
    void a.events.status$((t) => t.status === 'input_required').then(check)
  })
  return { call, answer, input }
}

describe('an answer to a task\'s input request', () => {
  afterEach(() => { vi.useRealTimers() })

  it('reaches the call waiting on another process, and the task works on', async () => {
    const store = new MemoryStore()
    const a = engine({ store: store.tasks, bus: store.bus, processId: 'a' })
    const b = engine({ store: store.tasks, bus: store.bus, processId: 'b' })
    const { call, answer, input } = await asking(a)
    expect(input).toMatchObject({ method: 'elicitation/create', params: ASKED, upstreamRequestId: 7, state: 'pending' })
    expect(await store.tasks.get(input.taskId, Date.now())).toMatchObject({ status: 'input_required', statusMessage: 'waiting for the user to answer an elicitation request: Which colour?' })

    expect(await b.inputs.answer('alice', { jsonrpc: '2.0', id: input.key, result: ACCEPTED })).toBe(true)
    expect(await answer).toEqual(ACCEPTED)
    expect(await store.tasks.get(input.taskId, Date.now())).toMatchObject({ status: 'working', statusMessage: null })
    call.resolve(DONE)
    await a.runner.settled()
    expect(await store.tasks.get(input.taskId, Date.now())).toMatchObject({ status: 'completed' })
  })

  it('passes a client\'s error on to the upstream as that error', async () => {
    const store = new MemoryStore()
    const a = engine({ store: store.tasks, bus: store.bus, processId: 'a' })
    const b = engine({ store: store.tasks, bus: store.bus, processId: 'b' })
    const { answer, input } = await asking(a)
    expect(await b.inputs.answer('alice', { jsonrpc: '2.0', id: input.key, error: { code: -32042, message: 'the user walked away' } })).toBe(true)
    const err = await answer.then(() => undefined, (e: unknown) => e)
    expect(err).toBeInstanceOf(RpcError)
    expect(err).toMatchObject({ rpcCode: -32042, message: 'the user walked away' })
  })

  it('is refused from another principal, and the input stays waiting for its own', async () => {
    const store = new MemoryStore()
    const a = engine({ store: store.tasks, bus: store.bus, processId: 'a' })
    const b = engine({ store: store.tasks, bus: store.bus, processId: 'b' })
    const { answer, input } = await asking(a)
    expect(await b.inputs.answer('mallory', { jsonrpc: '2.0', id: input.key, result: { action: 'decline' } })).toBe(false)
    expect(await store.tasks.getInput(input.key)).toMatchObject({ state: 'pending', answer: null })
    expect(await b.inputs.answer('alice', { jsonrpc: '2.0', id: input.key, result: ACCEPTED })).toBe(true)
    expect(await answer).toEqual(ACCEPTED)
  })

  it('reaches the waiting call when the signal between the processes is lost: the store is read again', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] })
    const store = new MemoryStore()
    const a = engine({ store: store.tasks, bus: store.bus, processId: 'a' })
    // b's signals go nowhere a listens.
    const b = engine({ store: store.tasks, bus: new MemoryBus(), processId: 'b' })
    const { answer, input } = await asking(a)
    let answered = false
    void answer.then(() => { answered = true })
    expect(await b.inputs.answer('alice', { jsonrpc: '2.0', id: input.key, result: ACCEPTED })).toBe(true)
    await vi.advanceTimersByTimeAsync(4000)
    expect(answered).toBe(false)
    await vi.advanceTimersByTimeAsync(1000)
    expect(await answer).toEqual(ACCEPTED)
  })

  it('is refused once the task was cancelled: the input expired with it, and the call was stopped', async () => {
    const store = new MemoryStore()
    const a = engine({ store: store.tasks, bus: store.bus, processId: 'a' })
    const b = engine({ store: store.tasks, bus: store.bus, processId: 'b' })
    const { call, input } = await asking(a)
    await b.service.cancel('alice', input.taskId)
    await a.runner.settled()
    expect(call.origin.signal.aborted).toBe(true)
    expect(await b.inputs.answer('alice', { jsonrpc: '2.0', id: input.key, result: ACCEPTED })).toBe(false)
    expect(await store.tasks.getInput(input.key)).toMatchObject({ state: 'expired' })
  })
})
