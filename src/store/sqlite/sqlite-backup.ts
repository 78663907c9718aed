import { existsSync, linkSync, mkdirSync, rmSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import Database from 'better-sqlite3'

/** What a backup wrote. */
export interface SqliteBackup {
  /** The file written. */
  target: string
  bytes: number
  /** Tasks in the copy, whatever their status. */
  tasks: number
  /** When the copy's snapshot was taken (its read transaction began about then). */
  takenAt: Date
  ms: number
}

/** How long opening the source may wait for a lock (only the recovery of a log a killed process left takes one). */
const OPEN_BUSY_TIMEOUT_MS = 5000

/**
 * Copies the store's SQLite file to `target` while a gateway process may be writing it.
 *
 * `VACUUM INTO` reads the whole file in one read transaction: the copy is the file as it was at one commit, and
 * in WAL mode a reader neither waits for the gateway's writes nor holds them up (only the checkpointer cannot copy
 * the log past that commit until the copy is done). The source is opened read-only, so this never takes the
 * gateway's holder row (SqliteFileLock) nor its write lock. The copy is written beside the target, then:
 *  - the holder row is deleted from it: the copy belongs to no process, and a gateway started on it (on this
 *    host while the original runs, or anywhere before the original's heartbeat is stale) starts at once;
 *  - it is checked (`PRAGMA quick_check`);
 *  - it is linked to `target`, which never names a partial file and is never overwritten.
 */
export function backupSqliteFile (source: string, target: string): SqliteBackup {
  if (source === ':memory:') throw new Error('the store is an in-memory SQLite database: there is no file to back up')
  if (!existsSync(source)) throw new Error(`the store file '${source}' does not exist`)
  if (existsSync(target)) throw new Error(`'${target}' exists already; a backup never overwrites a file: name a new one`)
  mkdirSync(dirname(target), { recursive: true })
  const partial = `${target}.partial-${process.pid}`
  rmSync(partial, { force: true })
  const started = performance.now()
  try {
    const db = new Database(source, { readonly: true, fileMustExist: true })
    let takenAt: Date
    try {
      db.pragma(`busy_timeout = ${OPEN_BUSY_TIMEOUT_MS}`)
      takenAt = new Date()
      db.prepare('VACUUM INTO ?').run(partial)
    } finally {
      db.close()
    }
    const tasks = settle(partial)
    linkSync(partial, target)
    return { target, bytes: statSync(target).size, tasks, takenAt, ms: Math.round(performance.now() - started) }
  } finally {
    rmSync(partial, { force: true })
  }
}

/** Frees the copy of its holder, checks it, and counts its tasks. */
function settle (path: string): number {
  const copy = new Database(path, { fileMustExist: true })
  try {
    const holder = copy.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'file_holder'").get()
    if (holder !== undefined) copy.exec('DELETE FROM file_holder')
    const check = copy.pragma('quick_check', { simple: true })
    if (check !== 'ok') throw new Error(`the copy fails SQLite's quick_check: ${String(check)}`)
    const tables = copy.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'tasks'").get()
    return tables === undefined ? 0 : (copy.prepare('SELECT count(*) AS n FROM tasks').get() as { n: number }).n
  } finally {
    copy.close()
  }
}
