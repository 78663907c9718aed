// The call engine: which calls run at once on an upstream (its call slots, and each principal's share of them),
// which call what the upstream asks belongs to, and how long a call may take. The upstream's sessions are faked:
// each request waits until the test answers it, or until its timeout passes (as the SDK does).
import { SdkError, SdkErrorCode } from '@modelcontextprotocol/client'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { CallEngine, type CallOrigin } from '../../src/calls/call-engine.ts'
import { GatewayError } from '../../src/errors.ts'
import { CallRegistry } from '../../src/upstream/call-attribution.ts'
import type { InflightCall } from '../../src/upstream/inflight-call.ts'
import { CallSlots, type SlotLimit } from '../../src/upstream/call-slots.ts'
import { sessionClient } from '../../src/upstream/client-ref.ts'
import type { Upstream } from '../../src/upstream/upstream.ts'
import type { JsonObject } from '../../src/wire/jsonrpc.ts'
import { heartConfig } from '../helpers/heart.ts'

/** A request the engine sent on a client's upstream session. */
interface Sent {
  client: string
  method: string
  params: JsonObject
  timeout: number
  call: InflightCall
  answer (result: JsonObject): void
}

/** An upstream (configured with `settings`) whose sessions hold each request until the test answers it. */
function fakeUpstream (settings: JsonObject = {}): { upstream: Upstream, sent: Sent[], next: () => Promise<Sent> } {
  const config = heartConfig(settings).upstreams[0]!
  const sent: Sent[] = []
  const waiters: Array<(request: Sent) => void> = []
  let taken = 0
  const sessionOf = (client: string): JsonObject => ({
    calls: new CallRegistry(),
    pristine: true,
    client: { getProtocolEra: () => 'legacy' },
    address: () => undefined,
    keepUpstream: () => {},
    request: async (method: string, params: JsonObject, options: { timeout: number, signal: AbortSignal, call: InflightCall }) =>
      await new Promise<JsonObject>((resolve, reject) => {
        const timer = setTimeout(() => reject(new SdkError(SdkErrorCode.RequestTimeout, 'Request timed out')), options.timeout)
        options.signal.addEventListener('abort', () => reject(options.signal.reason), { once: true })
        const answer = (result: JsonObject): void => {
          clearTimeout(timer)
          resolve(result)
        }
        const request: Sent = { client, method, params, timeout: options.timeout, call: options.call, answer }
        sent.push(request)
        waiters.shift()?.(request)
      }),
  })
  const upstream = {
    name: config.name,
    config,
    slots: new CallSlots(config.name, config.maxConcurrentCalls, config.maxQueuedCalls, config.maxConcurrentCallsPerPrincipal),
    forwardsAuthorization: false,
    closedBy: undefined,
    acquire: async (client: { key: string }) => ({ session: sessionOf(client.key), release: () => {} }),
  } as unknown as Upstream
  const next = async (): Promise<Sent> => {
    const ready = sent[taken]
    if (ready !== undefined) {
      taken++
      return ready
    }
    return await new Promise((resolve) => waiters.push((request) => { taken++; resolve(request) }))
  }
  return { upstream, sent, next }
}

/** A call's origin for `principal`'s client, recording what the engine tells it. */
type Origin = CallOrigin & { queuedFor: SlotLimit[], asked: string[], refusals: string[], controller: AbortController }

function originOf (principal: string, extra: Partial<CallOrigin> = {}): Origin {
  const controller = new AbortController()
  const queuedFor: SlotLimit[] = []
  const asked: string[] = []
  const refusals: string[] = []
  return {
    client: sessionClient(principal, principal, { elicitation: {} }),
    capabilities: { elicitation: {} },
    signal: controller.signal,
    ask: async (method) => {
      asked.push(method)
      return { action: 'accept', content: { from: principal } }
    },
    notify: () => {},
    queued: (limit) => { queuedFor.push(limit) },
    refused: (capability) => { refusals.push(capability) },
    ...extra,
    queuedFor,
    asked,
    refusals,
    controller,
  }
}

const OK = { content: [{ type: 'text', text: 'ok' }] }

function codeOf (err: unknown): string | undefined {
  return err instanceof GatewayError ? err.code : undefined
}

/** Lets every pending callback run (fake timers leave the microtask queue alone). */
async function drain (): Promise<void> {
  await vi.advanceTimersByTimeAsync(0)
}

describe('the call engine', () => {
  afterEach(() => { vi.useRealTimers() })

  it('runs an upstream\'s maxConcurrentCalls at once; the next call waits, told why, and runs when one ends', async () => {
    vi.useFakeTimers()
    const { upstream, sent, next } = fakeUpstream({ maxConcurrentCalls: 1 })
    const engine = new CallEngine()
    const target = { upstream, target: 'slow', native: false }
    const first = engine.run(target, { name: 'demo__slow' }, originOf('alice'))
    const bob = originOf('bob')
    const second = engine.run(target, { name: 'demo__slow' }, bob)
    const running = await next()
    await drain()
    expect(sent.map((r) => r.client)).toEqual(['session:alice'])
    expect(bob.queuedFor).toEqual(['maxConcurrentCalls'])
    running.answer(OK)
    expect(await first).toEqual(OK)
    const then = await next()
    expect(then).toMatchObject({ client: 'session:bob', method: 'tools/call', params: { name: 'slow' } })
    then.answer(OK)
    expect(await second).toEqual(OK)
  })

  it('holds a principal to its maxConcurrentCallsPerPrincipal while others\' calls run', async () => {
    vi.useFakeTimers()
    const { upstream, sent, next } = fakeUpstream({ maxConcurrentCalls: 4, maxConcurrentCallsPerPrincipal: 1 })
    const engine = new CallEngine()
    const target = { upstream, target: 'slow', native: false }
    void engine.run(target, {}, originOf('alice'))
    const again = originOf('alice')
    const queued = engine.run(target, {}, again)
    void engine.run(target, {}, originOf('bob'))
    await next()
    await next()
    await drain()
    expect(sent.map((r) => r.client)).toEqual(['session:alice', 'session:bob'])
    expect(again.queuedFor).toEqual(['maxConcurrentCallsPerPrincipal'])
    sent[0]!.answer(OK)
    expect((await next()).client).toBe('session:alice')
    sent[2]!.answer(OK)
    expect(await queued).toEqual(OK)
  })

  it('fails a call a client waits on after slotWaitTimeout, naming the bound; a task\'s call waits on', async () => {
    vi.useFakeTimers()
    const { upstream, sent, next } = fakeUpstream({ maxConcurrentCalls: 1, slotWaitTimeout: '2s' })
    const engine = new CallEngine()
    const target = { upstream, target: 'slow', native: false }
    void engine.run(target, {}, originOf('alice'))
    await next()
    const impatient = engine.run(target, {}, originOf('bob')).catch((err: unknown) => err)
    const patient = engine.run(target, {}, originOf('carol', { patient: true }))
    await vi.advanceTimersByTimeAsync(1999)
    expect(upstream.slots.waiting).toBe(2)
    await vi.advanceTimersByTimeAsync(1)
    const err = await impatient
    expect(codeOf(err)).toBe('GW_ERR_UPSTREAM_SLOT_TIMEOUT')
    expect(String(err)).toContain('maxConcurrentCalls')
    await vi.advanceTimersByTimeAsync(60_000)
    expect(upstream.slots.waiting).toBe(1)
    sent[0]!.answer(OK)
    ;(await next()).answer(OK)
    expect(await patient).toEqual(OK)
  })

  it('gives what the upstream asks during a call to that call\'s client, and its slot to another call while it waits', async () => {
    vi.useFakeTimers()
    const { upstream, next } = fakeUpstream({ maxConcurrentCalls: 1 })
    const engine = new CallEngine()
    const target = { upstream, target: 'ask', native: false }
    const alice = originOf('alice')
    const bob = originOf('bob')
    const aliceCall = engine.run(target, {}, alice)
    const bobCall = engine.run(target, {}, bob)
    const asking = await next()
    // Alice's call asks her; while it waits for her answer, Bob's call has the only slot.
    let answered: JsonObject | undefined
    const answer = asking.call.ask('elicitation/create', { message: 'Sure?' }, new AbortController().signal).then((a) => { answered = a })
    const bobs = await next()
    expect(bobs.client).toBe('session:bob')
    await drain()
    expect({ alice: alice.asked, bob: bob.asked }).toEqual({ alice: ['elicitation/create'], bob: [] })
    // Alice answered, but her answer goes upstream only once she has a slot again.
    expect(answered).toBeUndefined()
    expect(alice.queuedFor).toEqual(['maxConcurrentCalls'])
    bobs.answer(OK)
    await answer
    expect(answered).toEqual({ action: 'accept', content: { from: 'alice' } })
    asking.answer(OK)
    expect(await Promise.all([aliceCall, bobCall])).toEqual([OK, OK])
  })

  it('refuses the upstream what the client did not declare, without asking the client', async () => {
    const { upstream, next } = fakeUpstream()
    const engine = new CallEngine()
    const alice = originOf('alice', { capabilities: {} })
    const call = engine.run({ upstream, target: 'ask', native: false }, {}, alice)
    const asking = await next()
    const err = await asking.call.ask('sampling/createMessage', { messages: [] }, new AbortController().signal).catch((e: unknown) => e)
    expect(codeOf(err)).toBe('GW_ERR_CLIENT_CAPABILITY_MISSING')
    expect(alice.asked).toEqual([])
    expect(alice.refusals).toEqual(['sampling'])
    asking.answer(OK)
    expect(await call).toEqual(OK)
  })

  it('gives a tool its own timeout over timeouts.call, a prompt timeouts.request, and says which ran out', async () => {
    vi.useFakeTimers()
    const { upstream, sent } = fakeUpstream({ toolSettings: { quick: { timeout: '500ms' } }, timeouts: { call: '10s', request: '3s' } })
    const engine = new CallEngine()
    const quick = engine.run({ upstream, target: 'quick', native: false }, {}, originOf('alice')).catch((err: unknown) => err)
    const other = engine.run({ upstream, target: 'other', native: false }, {}, originOf('bob'))
    const prompt = engine.run({ upstream, target: 'greet', native: false }, {}, originOf('carol'), 'prompts/get')
    await drain()
    expect(sent.map((r) => [r.params.name, r.timeout])).toEqual([['quick', 500], ['other', 10_000], ['greet', 3000]])
    await vi.advanceTimersByTimeAsync(500)
    const err = await quick
    expect(codeOf(err)).toBe('GW_ERR_UPSTREAM_TIMEOUT')
    expect(String(err)).toContain("tools/call 'quick' within 500ms")
    sent[1]!.answer(OK)
    sent[2]!.answer({ messages: [] })
    expect(await other).toEqual(OK)
    expect(await prompt).toEqual({ messages: [] })
  })

  it('ends a cancelled call with GW_ERR_REQUEST_CANCELLED and frees its slot for the next', async () => {
    vi.useFakeTimers()
    const { upstream, next } = fakeUpstream({ maxConcurrentCalls: 1 })
    const engine = new CallEngine()
    const target = { upstream, target: 'slow', native: false }
    const alice = originOf('alice')
    const cancelled = engine.run(target, {}, alice).catch((err: unknown) => err)
    const waiting = engine.run(target, {}, originOf('bob'))
    await next()
    alice.controller.abort(new Error('the client cancelled'))
    expect(codeOf(await cancelled)).toBe('GW_ERR_REQUEST_CANCELLED')
    ;(await next()).answer(OK)
    expect(await waiting).toEqual(OK)
    expect(upstream.slots.active).toBe(0)
  })
})
