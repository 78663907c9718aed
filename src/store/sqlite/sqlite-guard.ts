import { setTimeout as delay } from 'node:timers/promises'
import Database from 'better-sqlite3'
import { GatewayError } from '../../errors.ts'

/**
 * How long a store operation waits by default (`store.busyWait`), in all, for a write lock another process holds (a `sqlite3` shell in a
 * transaction, a backup tool) before it is refused. It waits off the event loop: the connection's own
 * busy_timeout is 0, so a locked file costs each attempt microseconds, not the process.
 */
export const BUSY_WAIT_LIMIT_MS = 5000
/** The first pause before an operation that found the file locked tries again; it doubles up to the next. */
const FIRST_RETRY_MS = 5
const MAX_RETRY_MS = 200

/** Whether `err` (or the SQLite failure a GatewayError carries) says another connection holds the lock. */
export function isBusy (err: unknown): boolean {
  const backend: unknown = err instanceof GatewayError ? err.cause : err
  return backend instanceof Database.SqliteError && (backend.code === 'SQLITE_BUSY' || backend.code.startsWith('SQLITE_BUSY_'))
}

/** Which operations of a store part a fault refuses: `all` writes, or only those that take new work (`creations`). */
export interface GuardedOperations {
  /** The operations that write. */
  writes: ReadonlySet<string>
  /** Those of them that accept new work (a task, a session): refused on any fault. */
  creations: ReadonlySet<string>
}

/** What stops the store from taking writes, and how much it stops. */
export interface StoreFault {
  /** Said to the client refused and in readiness (`the store is unavailable: <detail>`). */
  detail: string
  /** `creations`: the file is no longer the one at its path, new work only would be lost; `writes`: none can be made. */
  refuses: 'creations' | 'writes'
}

/**
 * Two things between callers and a SQLite store part: a fault (the file deleted under the process, a disk
 * too full to open it for writing) refuses what it must with GW_ERR_STORE_UNAVAILABLE naming it, and an
 * operation that finds the file locked by another process (SQLITE_BUSY) is tried again, after growing pauses,
 * until it succeeds or BUSY_WAIT_LIMIT_MS have passed; then it is refused, naming the lock. Every operation of
 * a part is one transaction (or one statement), so one that failed with SQLITE_BUSY changed nothing and may run again.
 */
export class SqliteGuard {
  readonly #path: string
  readonly #fault: () => StoreFault | undefined
  readonly #waitLimitMs: number

  constructor (path: string, fault: () => StoreFault | undefined, waitLimitMs = BUSY_WAIT_LIMIT_MS) {
    this.#path = path
    this.#fault = fault
    this.#waitLimitMs = waitLimitMs
  }

  /** `target` with each operation returning a promise guarded. */
  wrap<T extends object> (target: T, operations: GuardedOperations): T {
    return new Proxy(target, {
      get: (object, property) => {
        const value: unknown = Reflect.get(object, property, object)
        if (typeof value !== 'function' || typeof property !== 'string') return value
        const write = operations.writes.has(property)
        const creation = operations.creations.has(property)
        return (...args: unknown[]) => {
          const fault = write ? this.#fault() : undefined
          if (fault !== undefined && (creation || fault.refuses === 'writes')) {
            return Promise.reject(new GatewayError('GW_ERR_STORE_UNAVAILABLE', [fault.detail]))
          }
          const result: unknown = value.apply(object, args)
          if (!(result instanceof Promise)) return result
          return result.catch(async (err: unknown) => {
            if (!isBusy(err)) throw err
            return await this.#retry(() => value.apply(object, args) as Promise<unknown>, err)
          })
        }
      },
    })
  }

  async #retry (again: () => Promise<unknown>, first: unknown): Promise<unknown> {
    const deadline = performance.now() + this.#waitLimitMs
    let pause = FIRST_RETRY_MS
    let last = first
    while (performance.now() + pause < deadline) {
      await delay(pause)
      pause = Math.min(MAX_RETRY_MS, pause * 2)
      try {
        return await again()
      } catch (err) {
        if (!isBusy(err)) throw err
        last = err
      }
    }
    const cause = last instanceof GatewayError ? last.cause : last
    throw new GatewayError('GW_ERR_STORE_UNAVAILABLE', [
      `another process has held the write lock of the SQLite file '${this.#path}' for ${this.#waitLimitMs} ms (SQLITE_BUSY); ` +
      'nothing was written: end what holds it (a sqlite3 shell in a transaction, a backup tool), then try again',
    ], { cause })
  }
}
