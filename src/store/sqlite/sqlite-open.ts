import { mkdirSync, statfsSync } from 'node:fs'
import { dirname } from 'node:path'
import Database from 'better-sqlite3'
import { GatewayError } from '../../errors.ts'
import { migrate, SCHEMA_VERSION } from './sqlite-schema.ts'
import { WAL_SIZE_LIMIT_BYTES } from './checkpointer.ts'
import { SqliteFileLock, type SqliteFileLockOptions } from './sqlite-file-lock.ts'

/** How long opening the file may wait for a lock held elsewhere: nothing is served yet, so the event loop may. */
const OPEN_BUSY_TIMEOUT_MS = 5000
/** Below this many free bytes, an I/O failure to open the file is the disk being full. */
const FULL_DISK_BYTES = 1024 * 1024

/** A SQLite file opened for the store: for writing and held (`lock`), or, on a full disk, for reading only. */
export interface OpenedFile {
  db: Database.Database
  lock: SqliteFileLock | undefined
  /** Why nothing can be written (a full disk), when the file could only be opened to be read. */
  readOnly: string | undefined
}

/** The free bytes of the file system holding `path`, or undefined when it cannot be asked. */
function freeBytes (path: string): number | undefined {
  try {
    const stats = statfsSync(dirname(path))
    return stats.bavail * stats.bsize
  } catch {
    return undefined
  }
}

/**
 * Why opening failed because the file cannot grow, or undefined for any other failure: SQLITE_FULL (the disk, or
 * the process's file size limit), or an I/O failure on a file system with next to nothing free (the shared-memory
 * index a WAL file needs cannot even be created there).
 */
function fullDisk (err: unknown, path: string): string | undefined {
  if (!(err instanceof Database.SqliteError)) return undefined
  const free = freeBytes(path)
  if (err.code !== 'SQLITE_FULL' && !(err.code.startsWith('SQLITE_IOERR') && free !== undefined && free < FULL_DISK_BYTES)) return undefined
  return `the disk holding the SQLite file '${path}' is full (${err.code}${free === undefined ? '' : `, ${free} bytes free`}): ` +
    'the gateway serves the tasks the file holds and takes no new ones; free space, then restart it'
}

/** Opens `path` for writing: WAL mode, the file held for this process (SqliteFileLock), the schema migrated. */
function openWritable (path: string, lock: SqliteFileLockOptions | undefined): { db: Database.Database, lock: SqliteFileLock | undefined } {
  const db = new Database(path)
  let held: SqliteFileLock | undefined
  try {
    // Freed pages (swept tasks) can be given back to the file system; takes effect on a new file only.
    db.pragma('auto_vacuum = INCREMENTAL')
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = NORMAL')
    db.pragma(`busy_timeout = ${OPEN_BUSY_TIMEOUT_MS}`)
    db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`)
    // Held before anything else touches the file: migrations and restart recovery included.
    if (path !== ':memory:') held = new SqliteFileLock(db, path, lock)
    // A file written before incremental vacuum was on is rewritten once (its size, once, at start-up).
    if (db.pragma('auto_vacuum', { simple: true }) !== 2) db.exec('VACUUM')
    migrate(db)
    // From now on a lock held by another process must not stall the event loop: SQLITE_BUSY comes back at once,
    // and SqliteGuard tries again off the loop.
    db.pragma('busy_timeout = 0')
    return { db, lock: held }
  } catch (err) {
    held?.release()
    db.close()
    throw err
  }
}

/**
 * Opens a file on a disk too full to write it, to read it only. Exclusive locking mode keeps the WAL index in
 * the process's memory (its shared-memory file cannot be created on a full disk) and keeps every other process
 * out of the file meanwhile. A schema this gateway would have to migrate cannot be read: the first failure stands.
 */
function openReadOnly (path: string, failure: unknown): Database.Database {
  const db = new Database(path)
  try {
    db.pragma('locking_mode = EXCLUSIVE')
    if (db.pragma('user_version', { simple: true }) !== SCHEMA_VERSION) throw failure
    return db
  } catch (err) {
    db.close()
    throw err === failure ? failure : new GatewayError('GW_ERR_STORE_UNAVAILABLE', [`cannot open '${path}' even to read it`], { cause: failure })
  }
}

/** Opens the store's file, for writing when it can be written, for reading when only a full disk stops that. */
export function openSqliteFile (path: string, lock?: SqliteFileLockOptions): OpenedFile {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true })
  try {
    return { ...openWritable(path, lock), readOnly: undefined }
  } catch (err) {
    const full = path === ':memory:' ? undefined : fullDisk(err, path)
    if (full === undefined) throw err
    return { db: openReadOnly(path, err), lock: undefined, readOnly: full }
  }
}
