import type Database from 'better-sqlite3'
import { overBudget } from '../stored-bytes.ts'

/**
 * Takes the bytes of the tasks past their TTL at @now off their accounts, returning the accounts it changed: one pass
 * over those tasks (tasks_expires) summed per account, so that a sweep reads what it removes, not every task of each
 * account it touches, nor every account.
 */
export const SWEEP_ACCOUNT_BYTES = `UPDATE account_bytes SET bytes = account_bytes.bytes - swept.bytes
  FROM (SELECT account, SUM(bytes) AS bytes FROM tasks INDEXED BY tasks_expires WHERE expires_at <= @now GROUP BY account) AS swept
  WHERE account_bytes.account = swept.account
  RETURNING account_bytes.account AS account, account_bytes.bytes AS bytes`

/**
 * The bytes each account's tasks store (TaskCreateOptions.maxStoredBytes), in the `account_bytes` table, with
 * each task's own share in its `bytes` column. Every method runs inside the caller's transaction, so a count
 * changes in the same step as the write it counts.
 */
export class SqliteAccountBytes {
  readonly #of: Database.Statement<[string], { bytes: number }>
  readonly #addToTask: Database.Statement<[{ id: string, bytes: number }], { account: string }>
  readonly #addToAccount: Database.Statement<[{ account: string, bytes: number }]>
  readonly #sweep: Database.Statement<[{ now: number }], { account: string, bytes: number }>
  readonly #dropOne: Database.Statement<[string]>

  constructor (db: Database.Database) {
    this.#of = db.prepare('SELECT bytes FROM account_bytes WHERE account = ?')
    this.#addToTask = db.prepare('UPDATE tasks SET bytes = bytes + @bytes WHERE id = @id RETURNING account')
    this.#addToAccount = db.prepare(`INSERT INTO account_bytes (account, bytes) VALUES (@account, @bytes)
      ON CONFLICT (account) DO UPDATE SET bytes = bytes + excluded.bytes`)
    this.#sweep = db.prepare(SWEEP_ACCOUNT_BYTES)
    this.#dropOne = db.prepare('DELETE FROM account_bytes WHERE account = ? AND bytes <= 0')
  }

  of (account: string): number {
    return this.#of.get(account)?.bytes ?? 0
  }

  /** Throws GW_ERR_STORED_BYTES_LIMIT when `adding` bytes would take `account` past `max`. */
  check (account: string, adding: number, max: number | undefined): void {
    if (max === undefined || adding <= 0) return
    const refusal = overBudget(this.of(account), adding, max)
    if (refusal) throw refusal
  }

  /** Counts `bytes` (negative: frees them) for a stored task, in its own count and its account's. */
  add (taskId: string, bytes: number): void {
    if (bytes === 0) return
    const owner = this.#addToTask.get({ id: taskId, bytes })?.account
    if (owner !== undefined) this.#addToAccount.run({ account: owner, bytes })
  }

  /** Counts `bytes` (negative: frees them) for `account` alone (a new task's or a session's, whose row holds its own). */
  addTo (account: string, bytes: number): void {
    if (bytes === 0) return
    this.#addToAccount.run({ account, bytes })
    if (bytes < 0) this.#dropOne.run(account)
  }

  /** Takes the bytes of the tasks past their TTL at `now` off their accounts (before they are deleted). */
  sweep (now: number): void {
    for (const { account, bytes } of this.#sweep.all({ now })) if (bytes <= 0) this.#dropOne.run(account)
  }
}
