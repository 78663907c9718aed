import type { Logger } from './logger.ts'

/**
 * The two ways a failure may go without being thrown on, so that none is dropped without a trace
 * (`test/unit/silent-catches.test.ts` keeps handlers that drop an error without a word out of src/):
 *
 * - `ignoreWithTrace(log, why)`: nothing more can be done about it (a notification to a client that left, a
 *   best-effort release that the next expiry makes anyway). It is logged at debug, with why it may be ignored.
 * - `settled(promise)`: the caller only waits for it to be over (a queue's next link waits for the previous one
 *   either way, a wait a signal may cut short), while the failure is reported where the promise is made or
 *   awaited. Nothing is ignored, only waited for.
 */
export function ignoreWithTrace (log: Logger | undefined, why: string, fields?: Record<string, unknown>): (err: unknown) => void {
  // Without a logger (a store opened by the backup command) there is nowhere to trace it.
  return (err) => { log?.debug({ ...fields, err }, why) }
}

function nothing (): void {}

/**
 * Settles when `promise` does, fulfilled or rejected, for a caller that only waits for it to be over: where it is
 * used, the failure is reported by whoever made or awaits `promise` itself (say which), or is the expected end of
 * a wait (an aborted timer).
 */
export function settled (promise: Promise<unknown>): Promise<void> {
  return promise.then(nothing, nothing)
}
