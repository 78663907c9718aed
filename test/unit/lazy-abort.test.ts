import { describe, expect, it } from 'vitest'
import { LazyAbort } from '../../src/wire/lazy-abort.ts'

describe('LazyAbort', () => {
  it('aborts a signal handed out before, with the reason, once', () => {
    const abort = new LazyAbort()
    const signal = abort.signal
    const reasons: unknown[] = []
    signal.addEventListener('abort', () => reasons.push(signal.reason))
    const reason = new Error('first')
    abort.abort(reason)
    abort.abort(new Error('second'))
    expect(abort.aborted).toBe(true)
    expect(reasons).toEqual([reason])
    expect(abort.signal).toBe(signal)
  })

  it('hands out an aborted signal when it was aborted before anyone asked', () => {
    const abort = new LazyAbort()
    const reason = new Error('gone')
    abort.abort(reason)
    expect(abort.signal.aborted).toBe(true)
    expect(abort.signal.reason).toBe(reason)
    expect(abort.reason).toBe(reason)
  })

  it('is not aborted until told', () => {
    const abort = new LazyAbort()
    expect(abort.aborted).toBe(false)
    expect(abort.signal.aborted).toBe(false)
  })
})
