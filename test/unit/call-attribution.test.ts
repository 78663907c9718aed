import { describe, expect, it } from 'vitest'
import { CallRegistry, untagged } from '../../src/upstream/call-attribution.ts'
import type { CallSink, InflightCall } from '../../src/upstream/inflight-call.ts'

const sink: CallSink = { input: async () => ({}), notify: () => {} }
/** A client that never answers: a call that asks it stays waiting for the answer. */
const silent: CallSink = { input: async () => await new Promise<never>(() => {}), notify: () => {} }

/** `call` asks its client something, which stays unanswered. */
function asks (call: InflightCall): void {
  void call.ask('elicitation/create', { message: 'Sure?' }, new AbortController().signal)
}

/** Registers `call`'s request `id` as the transport would when the request goes out. */
function sent (calls: CallRegistry, call: InflightCall, id: number): void {
  expect(calls.sent(id, calls.headers(call, { authorization: 'Bearer x' }))).toEqual({ authorization: 'Bearer x' })
}

function pick (calls: CallRegistry, params?: Record<string, unknown>): InflightCall | string {
  const found = calls.attribute(params)
  return typeof found === 'string' ? found : found.call
}

describe('attribution of what an upstream sends during calls', () => {
  it('names the call whose response stream a message arrived on, exactly', () => {
    const calls = new CallRegistry()
    const [a, b] = [calls.begin('client-1', sink), calls.begin('client-2', sink)]
    sent(calls, a, 7)
    sent(calls, b, 8)
    const message: { method: string, params?: Record<string, unknown> } = { method: 'elicitation/create', params: { message: 'hi' } }
    calls.tagArrival(message, 7)
    expect(calls.attribute(message.params)).toEqual({ call: a, exact: true })
    expect(untagged(message.params!)).toEqual({ message: 'hi' })
  })

  it('names the call of an upstream task, or of a progress token, exactly', () => {
    const calls = new CallRegistry()
    const [a, b] = [calls.begin('client-1', sink), calls.begin('client-1', sink)]
    a.follows('up-1')
    sent(calls, b, 3)
    expect(calls.attribute({ _meta: { 'io.modelcontextprotocol/related-task': { taskId: 'up-1' } } })).toEqual({ call: a, exact: true })
    expect(calls.attribute({ _meta: { progressToken: 3 } })).toEqual({ call: b, exact: true })
    expect(calls.attribute({ taskId: 'up-1', status: 'working' }, 'notifications/tasks/status')).toEqual({ call: a, exact: true })
    calls.answered(3)
    expect(calls.attribute({ _meta: { progressToken: 3 } })).toEqual({ call: b, exact: false })
  })

  it('lets a call screen the results answering its own requests before the SDK sees them, and no other', () => {
    const calls = new CallRegistry()
    const [call, other] = [calls.begin('client-1', sink), calls.begin('client-1', sink)]
    call.screenResults((result) => ({ ...result, screened: true }))
    sent(calls, call, 4)
    sent(calls, other, 6)
    const response: Record<string, unknown> = { jsonrpc: '2.0', id: 4, result: { content: [] } }
    calls.screen(response)
    expect(response.result).toEqual({ content: [], screened: true })
    // Another call's response, a request of no call, and an error pass untouched.
    for (const stray of [{ id: 6, result: { content: [] } }, { id: 5, result: { content: [] } }, { id: 4, error: { code: -1, message: 'no' } }]) {
      const copy = structuredClone(stray)
      calls.screen(copy)
      expect(copy).toEqual(stray)
    }
    call.screenResults(undefined)
    const after: Record<string, unknown> = { jsonrpc: '2.0', id: 4, result: { content: [] } }
    calls.screen(after)
    expect(after.result).toEqual({ content: [] })
  })

  it('gives the rest to the only call, else to the newest call of the one client not already waiting', () => {
    const calls = new CallRegistry()
    expect(calls.attribute({})).toBe('none')
    const a = calls.begin('client-1', silent)
    expect(calls.attribute({})).toEqual({ call: a, exact: false })
    const b = calls.begin('client-1', silent)
    const c = calls.begin('client-1', silent)
    expect(pick(calls)).toBe(c)
    asks(c)
    expect(pick(calls)).toBe(b)
    asks(b)
    asks(a)
    expect(pick(calls)).toBe(c)
    const ended = calls.ended(c)
    expect(ended.aborted).toBe(false)
    calls.end(c)
    expect(ended.aborted).toBe(true)
    expect(calls.ended(c).aborted).toBe(true)
    expect(pick(calls)).toBe(b)
  })

  it('forgets the requests of a call that ended without their responses (cancelled upstream, never answered)', () => {
    const calls = new CallRegistry()
    const cancelled = calls.begin('client-1', sink)
    sent(calls, cancelled, 5)
    calls.end(cancelled)
    expect(calls.attribute({ _meta: { progressToken: 5 } })).toBe('none')
  })

  it('gives what arrives on the stream of an ended call\'s request to no call, not to another call of its client', () => {
    const calls = new CallRegistry()
    const [ended, other] = [calls.begin('client-1', sink), calls.begin('client-1', sink)]
    sent(calls, ended, 5)
    calls.end(ended)
    const late: { method: string, params?: Record<string, unknown> } = { method: 'elicitation/create', params: { message: 'late' } }
    calls.tagArrival(late, 5)
    expect(calls.attribute(late.params)).toBe('none')
    const unrelated: { method: string, params?: Record<string, unknown> } = { method: 'elicitation/create', params: { message: 'other stream' } }
    calls.tagArrival(unrelated, 99)
    expect(calls.attribute(unrelated.params)).toEqual({ call: other, exact: false })
  })

  it('on a transport with a response stream per request, gives a call only what it can prove is that call\'s', () => {
    const calls = new CallRegistry()
    calls.exactOnly = true
    const call = calls.begin('client-1', sink)
    sent(calls, call, 7)
    // Sent on the session's stream: the session's, even with one call in flight.
    expect(calls.attribute({ message: 'session start' })).toBe('none')
    const own: { method: string, params?: Record<string, unknown> } = { method: 'elicitation/create', params: { message: 'mine' } }
    calls.tagArrival(own, 7)
    expect(calls.attribute(own.params)).toEqual({ call, exact: true })
  })

  it('refuses to choose between calls of several clients', () => {
    const calls = new CallRegistry()
    calls.begin('client-1', sink)
    calls.begin('client-2', sink)
    expect(calls.attribute({ message: 'whose?' })).toBe('ambiguous')
  })
})
