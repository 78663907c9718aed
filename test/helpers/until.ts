import { setTimeout as delay } from 'node:timers/promises'

export interface UntilOptions {
  /** How long to keep asking before failing (default 20 s: a guard against hangs on a loaded machine, not a timing claim). */
  timeoutMs?: number
  /** The pause between two probes (default 25 ms). */
  everyMs?: number
  /** Appended to the timeout error: what the last probe saw. */
  describeLast?: () => string
}

/**
 * Calls `probe` until it returns something other than undefined, and returns that. For states the gateway
 * announces to nobody (a count in its admin API, a key in Redis, a process's RSS); where there is an event
 * (a log line, a notification, a process exit), wait on the event instead.
 */
export async function until<T> (what: string, probe: () => T | undefined | Promise<T | undefined>, options: UntilOptions = {}): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 20_000
  // The monotonic clock: a test may fake Date.
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (performance.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms${options.describeLast?.() ?? ''}`)
    await delay(options.everyMs ?? 25)
  }
}
