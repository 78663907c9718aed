import Database from 'better-sqlite3'
import { GatewayError } from '../../errors.ts'
import type { GatewayStore, GrantStore, SessionStore, StoreHealth } from '../types.ts'
import { MemoryRateLimits } from '../memory/memory-rate-limits.ts'
import { MemoryBus } from '../memory/memory-bus.ts'
import { MemoryLeaseStore, MemoryStore } from '../memory/memory-store.ts'
import { Checkpointer } from './checkpointer.ts'
import { SqliteTaskStore } from './sqlite-task-store.ts'
import type { SqliteFileLock, SqliteFileLockOptions } from './sqlite-file-lock.ts'
import { MemoryHomeStore } from '../memory/memory-homes.ts'
import { WriteRefusals } from '../write-refusals.ts'
import { SqliteSessionStore } from './sqlite-session-store.ts'
import { SqliteGrantStore } from './sqlite-grant-store.ts'
import { openSqliteFile } from './sqlite-open.ts'
import { isBusy, SqliteGuard, type GuardedOperations, type StoreFault } from './sqlite-guard.ts'

/** The task store's operations that write, and the one that takes new work. */
const TASK_OPERATIONS: GuardedOperations = {
  writes: new Set(['create', 'transition', 'claim', 'sweep', 'addInput', 'settleInput']),
  creations: new Set(['create']),
}
const GRANT_OPERATIONS: GuardedOperations = {
  writes: new Set(['put', 'delete', 'sweep']),
  creations: new Set(),
}
const SESSION_OPERATIONS: GuardedOperations = {
  writes: new Set(['create', 'touch', 'delete', 'sweep']),
  creations: new Set(['create']),
}

/** A SQLite failure that refuses writes for a while: the disk (or the file's size limit) is full, or another process holds the lock. */
export function sqliteRefusal (err: unknown): string | undefined {
  const backend: unknown = err instanceof GatewayError ? err.cause : err
  if (!(backend instanceof Database.SqliteError)) return undefined
  if (backend.code === 'SQLITE_FULL') return 'SQLite refuses writes: the database or disk is full (SQLITE_FULL)'
  return isBusy(backend) ? 'SQLite refuses writes: another process holds the write lock of the file (SQLITE_BUSY)' : undefined
}

/** The embedded default: one SQLite file (WAL mode) that survives restarts. One process per file (SqliteFileLock). */
export class SqliteStore implements GatewayStore {
  readonly kind = 'sqlite'
  /** One process per file: after a restart, nothing the file names can still be running. */
  readonly shared = false
  readonly durable = true
  readonly sessions: SessionStore
  readonly tasks: SqliteTaskStore
  readonly bus = new MemoryBus()
  readonly leases = new MemoryLeaseStore()
  readonly homes = new MemoryHomeStore()
  /** In process: one process per file, so its buckets need not be shared (nor survive a restart). */
  readonly rateLimits = new MemoryRateLimits()
  readonly grants: GrantStore
  readonly #db: Database.Database
  readonly #checkpointer: Checkpointer | undefined
  readonly #lock: SqliteFileLock | undefined
  readonly #refusals: WriteRefusals
  /** Why the file was opened to be read only (a full disk at start), if it was. */
  readonly #readOnly: string | undefined

  /**
   * Throws GW_ERR_STORE_LOCKED when another live gateway process holds the file. `refusals` hears when writes
   * begin to be refused (a full disk) and when they are accepted again; `onFault`, once, why the store takes no
   * new work (its file deleted or replaced under the process, taken over by another, opened read-only on a full disk).
   */
  constructor (path: string, options: {
    lock?: SqliteFileLockOptions
    /** How long an operation waits for another process's write lock (SqliteGuard); default BUSY_WAIT_LIMIT_MS. */
    busyWaitMs?: number
    refusals?: WriteRefusals
    onFault?: (detail: string) => void
  } = {}) {
    const onFault = options.onFault ?? (() => {})
    const opened = openSqliteFile(path, { ...options.lock, onFault })
    this.#db = opened.db
    this.#lock = opened.lock
    this.#readOnly = opened.readOnly
    this.#refusals = options.refusals ?? new WriteRefusals()
    const guard = new SqliteGuard(path, () => this.#fault(), options.busyWaitMs)
    const tasks = new SqliteTaskStore(this.#db)
    this.tasks = this.#refusals.watch(guard.wrap(tasks, TASK_OPERATIONS), 'tasks', sqliteRefusal)
    // Read-only, sessions live in memory: clients can still connect and read what the file holds.
    this.sessions = this.#readOnly !== undefined
      ? new MemoryStore().sessions
      : this.#refusals.watch(guard.wrap(new SqliteSessionStore(this.#db, tasks.accountBytes), SESSION_OPERATIONS), 'sessions', sqliteRefusal)
    this.grants = guard.wrap(new SqliteGrantStore(this.#db), GRANT_OPERATIONS)
    if (this.#readOnly !== undefined) onFault(this.#readOnly)
    if (path !== ':memory:' && this.#readOnly === undefined) {
      this.#db.pragma('wal_autocheckpoint = 0')
      this.#checkpointer = new Checkpointer(path)
    }
  }

  /** What stops the store from taking work now, if anything. */
  #fault (): StoreFault | undefined {
    if (this.#readOnly !== undefined) return { detail: this.#readOnly, refuses: 'writes' }
    const detail = this.#lock?.fault
    return detail === undefined ? undefined : { detail, refuses: 'creations' }
  }

  async health (): Promise<StoreHealth> {
    try {
      this.#db.prepare('SELECT 1').get()
      const fault = this.#fault()
      const health: StoreHealth = fault === undefined ? { ok: true, kind: this.kind } : { ok: false, kind: this.kind, detail: fault.detail }
      return this.#refusals.health(health)
    } catch (err) {
      return { ok: false, kind: this.kind, detail: err instanceof Error ? err.message : String(err) }
    }
  }

  async close (): Promise<void> {
    if (this.#db.open) this.tasks.flushWrites()
    await this.#checkpointer?.close()
    this.#lock?.release()
    if (this.#db.open) this.#db.close()
  }
}
