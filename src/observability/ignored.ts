import type { Logger } from './logger.ts'

/**
 * The two ways a failure may go without being thrown on, so that none is dropped without a trace
 * (`test/unit/silent-catches.test.ts` keeps bare `.catch(() => {})` and empty `catch {}` out of src/):
 *
 * - `ignoreWithTrace(log, why)`: nothing more can be done about it (a notification to a client that left, a
 *   best-effort release that the next expiry makes anyway). It is logged at debug, with why it may be ignored.
 * - `settled(promise)`: a queue's next link waits for the previous one either way, while the previous one's
 *   failure reaches whoever awaits that promise itself. Nothing is ignored, only waited for.
 */
export function ignoreWithTrace (log: Logger, why: string, fields?: Record<string, unknown>): (err: unknown) => void {
  return (err) => { log.debug({ ...fields, err }, why) }
}

function nothing (): void {}

/** Settles when `promise` does, fulfilled or rejected; its rejection is for those who await `promise` itself. */
export function settled (promise: Promise<unknown>): Promise<void> {
  return promise.then(nothing, nothing)
}
