import { afterEach, describe, expect, it, vi } from 'vitest'
import { GatewayError } from '../../src/errors.ts'
import { whileStoreUnavailable } from '../../src/tasks/store-retry.ts'

const down = (): GatewayError => new GatewayError('GW_ERR_STORE_UNAVAILABLE', ['Redis is unreachable'])

/** A store call that fails `failures` times with GW_ERR_STORE_UNAVAILABLE, then answers `value`. */
function flaky<T> (failures: number, value: T): { work: () => Promise<T>, calls: () => number } {
  let calls = 0
  return {
    work: async () => {
      if (calls++ < failures) throw down()
      return value
    },
    calls: () => calls,
  }
}

describe('whileStoreUnavailable()', () => {
  afterEach(() => { vi.useRealTimers() })

  it('retries while the store is unavailable and returns once it answers', async () => {
    const store = flaky(3, 'stored')
    const retries: number[] = []
    expect(await whileStoreUnavailable(store.work, { until: undefined, onRetry: (_err, attempt) => retries.push(attempt) })).toBe('stored')
    expect(store.calls()).toBe(4)
    expect(retries).toEqual([1, 2, 3])
  })

  it('gives up with the store error once `until` has passed, its last wait cut short to it', async () => {
    vi.useFakeTimers({ now: 0 })
    const store = flaky(Number.POSITIVE_INFINITY, 'never')
    const givenUp = expect(whileStoreUnavailable(store.work, { until: 250 })).rejects.toMatchObject({ code: 'GW_ERR_STORE_UNAVAILABLE' })
    // Attempts at 0 and 100 ms (the first backoff); the second backoff, 200 ms, is cut to `until`.
    await vi.advanceTimersByTimeAsync(249)
    expect(store.calls()).toBe(2)
    await vi.advanceTimersByTimeAsync(1)
    await givenUp
    expect(store.calls()).toBe(3)
    expect(Date.now()).toBe(250)
  })

  it('makes one last attempt at once when the signal aborts, then gives up', async () => {
    const store = flaky(Number.POSITIVE_INFINITY, 'never')
    const controller = new AbortController()
    const attempt = whileStoreUnavailable(store.work, {
      until: undefined,
      signal: controller.signal,
      onRetry: (_err, n) => { if (n === 2) controller.abort() },
    })
    await expect(attempt).rejects.toMatchObject({ code: 'GW_ERR_STORE_UNAVAILABLE' })
    expect(store.calls()).toBe(3)
  })

  it('does not retry any other error', async () => {
    let calls = 0
    const work = async (): Promise<never> => {
      calls++
      throw new GatewayError('GW_ERR_TASK_NOT_FOUND', ['t1'])
    }
    await expect(whileStoreUnavailable(work, { until: undefined })).rejects.toMatchObject({ code: 'GW_ERR_TASK_NOT_FOUND' })
    expect(calls).toBe(1)
  })
})
