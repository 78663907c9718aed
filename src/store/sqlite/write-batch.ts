import type Database from 'better-sqlite3'

interface Pending<T> {
  item: T
  resolve (): void
  reject (err: unknown): void
}

/**
 * Writes of one kind that arrive in the same turn of the event loop, committed together in one write
 * transaction (a group commit): on a burst of task creations, most of the cost of a SQLite write is its
 * commit, and the commits of a burst are what stalls the event loop. Each write still runs in a savepoint
 * of its own, so one that fails (a limit, a constraint) fails alone and the others are kept; each promise
 * settles once the whole batch is committed, so a write is on disk exactly when it would have been alone.
 * A failure of the transaction itself (the disk, the lock) fails every write of the batch.
 */
export class WriteBatch<T> {
  readonly #one: Database.Transaction<(item: T) => void>
  readonly #all: Database.Transaction<(batch: Array<Pending<T>>) => Array<{ pending: Pending<T>, err: unknown }>>
  readonly #mapError: (err: unknown) => unknown
  #queued: Array<Pending<T>> = []

  /** `write` does one item's work (it may throw to refuse it); `mapError` turns a SQLite failure into what callers get. */
  constructor (db: Database.Database, write: (item: T) => void, mapError: (err: unknown) => unknown) {
    this.#mapError = mapError
    this.#one = db.transaction(write)
    this.#all = db.transaction((batch: Array<Pending<T>>) => {
      const failed: Array<{ pending: Pending<T>, err: unknown }> = []
      for (const pending of batch) {
        try {
          // Inside the batch's transaction this is a savepoint: a write that throws is rolled back alone.
          this.#one(pending.item)
        } catch (err) {
          failed.push({ pending, err })
        }
      }
      return failed
    })
  }

  /** Resolves once `item` is committed; rejects with its own failure, or the batch's. */
  write (item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.#queued.length === 0) setImmediate(() => { this.flush() })
      this.#queued.push({ item, resolve, reject })
    })
  }

  /** Commits what is queued now (before the database closes; otherwise at the end of the turn). */
  flush (): void {
    const batch = this.#queued
    if (batch.length === 0) return
    this.#queued = []
    let failed: Array<{ pending: Pending<T>, err: unknown }>
    try {
      // IMMEDIATE: the batch holds the write lock from its first read (a count before an insert) to its commit.
      failed = this.#all.immediate(batch)
    } catch (err) {
      const mapped = this.#mapError(err)
      for (const pending of batch) pending.reject(mapped)
      return
    }
    const refused = new Set(failed.map((f) => f.pending))
    for (const { pending, err } of failed) pending.reject(this.#mapError(err))
    for (const pending of batch) if (!refused.has(pending)) pending.resolve()
  }
}
