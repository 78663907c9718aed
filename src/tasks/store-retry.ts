import { GatewayError } from '../errors.ts'

export interface StoreRetryOptions {
  /** Epoch ms after which no further attempt is made; undefined: no limit. */
  until: number | undefined
  /** Ends the waiting: one last attempt is made at once, and its failure is thrown. */
  signal?: AbortSignal
  /** Called after each failed attempt that will be retried (`attempt` counts from 1). */
  onRetry? (err: GatewayError, attempt: number): void
}

const FIRST_DELAY_MS = 100
const MAX_DELAY_MS = 5000

/** Whether `err` says the store's backend is unreachable (a condition that passes, unlike a rejected write). */
export function isStoreUnavailable (err: unknown): err is GatewayError {
  return err instanceof GatewayError && err.code === 'GW_ERR_STORE_UNAVAILABLE'
}

/** Resolves after `ms`, or at once when `signal` aborts. On the global timers, which a test's fake clock drives. */
async function pause (ms: number, signal: AbortSignal | undefined): Promise<void> {
  await new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal?.addEventListener('abort', done, { once: true })
  })
}

/**
 * Runs `work` until it succeeds, retrying while the store is unavailable with a backoff from 100 ms
 * doubling to 5 s, until `until` or `signal`. Any other error, and the store error of the last attempt,
 * is thrown.
 */
export async function whileStoreUnavailable<T> (work: () => Promise<T>, options: StoreRetryOptions): Promise<T> {
  let delay = FIRST_DELAY_MS
  for (let attempt = 1; ; attempt++) {
    try {
      return await work()
    } catch (err) {
      if (!isStoreUnavailable(err)) throw err
      const left = options.until === undefined ? delay : Math.min(delay, options.until - Date.now())
      if (left <= 0 || options.signal?.aborted === true) throw err
      options.onRetry?.(err, attempt)
      await pause(left, options.signal)
      delay = Math.min(delay * 2, MAX_DELAY_MS)
    }
  }
}
