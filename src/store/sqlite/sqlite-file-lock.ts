import { randomUUID } from 'node:crypto'
import { statSync } from 'node:fs'
import { hostname } from 'node:os'
import type Database from 'better-sqlite3'
import { GatewayError } from '../../errors.ts'

/** A holder that has not recorded a heartbeat for this long is gone, wherever it ran (`store.lockStaleAfter`). */
export const DEFAULT_STALE_MS = 30_000
/** How often the holder records that it is alive: six beats per staleness limit, so a few missed ones (a busy file) cost nothing. */
export const DEFAULT_HEARTBEAT_MS = DEFAULT_STALE_MS / 6

export interface SqliteFileLockOptions {
  heartbeatMs?: number
  staleMs?: number
  /** The clock (epoch ms); tests pass their own. */
  now?: () => number
  /** Hears, once, that the file is no longer this process's (see SqliteFileLock.fault). */
  onFault?: (detail: string) => void
}

/** Which file a path names (device and inode), or undefined when it names none. */
function identityOf (path: string): string | undefined {
  try {
    const stat = statSync(path, { bigint: true })
    return `${stat.dev}:${stat.ino}`
  } catch {
    return undefined
  }
}

interface HolderRow {
  token: string
  host: string
  pid: number
  since: number
  heartbeat: number
}

/** Tokens of the locks this process holds (a process may open the same file only once). */
const heldHere = new Set<string>()

/** Whether a process with this id runs on this machine (EPERM: it runs, under another user). */
function processRuns (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * Holds a SQLite file for one gateway process. The holder is a row in the file itself (host, pid, since
 * and a heartbeat), taken in an IMMEDIATE transaction, so two processes starting together cannot both
 * win. A holder is gone, and its row may be taken over, when its heartbeat is older than `staleMs`, or
 * at once when it ran on this host and its pid no longer runs (kill -9) or is this very process
 * without holding it (a container restarted with the same host name and pid). Anything else refuses with GW_ERR_STORE_LOCKED.
 *
 * The table is created outside the numbered migrations: the lock must be held before they run.
 */
export class SqliteFileLock {
  readonly #db: Database.Database
  readonly #path: string
  readonly #token = randomUUID()
  readonly #staleMs: number
  readonly #now: () => number
  readonly #heartbeat: Database.Statement<[{ token: string, now: number }]>
  readonly #timer: NodeJS.Timeout
  readonly #onFault: (detail: string) => void
  /** The files this connection has open, as their paths named them when it took the file: the database, its log. */
  readonly #opened: Array<{ path: string, identity: string | undefined }>
  #lost = false
  #moved: string | undefined

  /** Takes the file or throws GW_ERR_STORE_LOCKED naming its holder. */
  constructor (db: Database.Database, path: string, options: SqliteFileLockOptions = {}) {
    this.#db = db
    this.#path = path
    this.#staleMs = options.staleMs ?? DEFAULT_STALE_MS
    this.#now = options.now ?? Date.now
    db.exec(`CREATE TABLE IF NOT EXISTS file_holder (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      token TEXT NOT NULL,
      host TEXT NOT NULL,
      pid INTEGER NOT NULL,
      since INTEGER NOT NULL,
      heartbeat INTEGER NOT NULL
    )`)
    const select = db.prepare<[], HolderRow>('SELECT token, host, pid, since, heartbeat FROM file_holder WHERE id = 1')
    const upsert = db.prepare(`INSERT INTO file_holder (id, token, host, pid, since, heartbeat) VALUES (1, @token, @host, @pid, @now, @now)
      ON CONFLICT (id) DO UPDATE SET token = @token, host = @host, pid = @pid, since = @now, heartbeat = @now`)
    db.transaction(() => {
      const holder = select.get()
      if (holder && !this.#gone(holder)) {
        throw new GatewayError('GW_ERR_STORE_LOCKED', [path, holder.pid, holder.host, new Date(holder.since).toISOString()])
      }
      upsert.run({ token: this.#token, host: hostname(), pid: process.pid, now: this.#now() })
    }).immediate()
    heldHere.add(this.#token)
    this.#onFault = options.onFault ?? (() => {})
    this.#opened = [path, `${path}-wal`].map((file) => ({ path: file, identity: identityOf(file) }))
    this.#heartbeat = db.prepare('UPDATE file_holder SET heartbeat = @now WHERE id = 1 AND token = @token')
    this.#timer = setInterval(() => this.#beat(), options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS)
    this.#timer.unref()
  }

  #gone (holder: HolderRow): boolean {
    if (this.#now() - holder.heartbeat > this.#staleMs) return true
    if (holder.host !== hostname()) return false
    return holder.pid === process.pid ? !heldHere.has(holder.token) : !processRuns(holder.pid)
  }

  #beat (): void {
    this.#checkPaths()
    try {
      const lost = this.#heartbeat.run({ token: this.#token, now: this.#now() }).changes === 0
      if (lost && !this.#lost && this.#moved === undefined) this.#onFault(`another gateway process took over '${this.#path}' after this one missed its heartbeats`)
      this.#lost = lost
    } catch {
      // Busy or closed: the next beat tries again; a holder is stale only after staleMs without one.
    }
  }

  /**
   * Whether the paths still name the files this connection writes. Deleted or replaced (a restore copied over
   * it, a cleanup job), the open file lives on unnamed: everything written to it is gone at the next start.
   */
  #checkPaths (): void {
    if (this.#moved !== undefined) return
    for (const file of this.#opened) {
      const now = identityOf(file.path)
      if (file.identity === undefined) file.identity = now
      if (now === file.identity) continue
      this.#moved = `the SQLite file '${file.path}' was ${now === undefined ? 'deleted' : 'replaced by another file'} while this gateway ` +
        'process had it open; what it writes now would be lost at the next start, so it takes no new work: restart it'
      this.#onFault(this.#moved)
      return
    }
  }

  /**
   * Why the file is no longer this process's, or undefined: its path no longer names it (deleted, replaced), or
   * another process took it over after missed heartbeats.
   */
  get fault (): string | undefined {
    if (this.#moved !== undefined) return this.#moved
    return this.#lost ? `another gateway process took over '${this.#path}' after this one missed its heartbeats` : undefined
  }

  /** Gives the file up (before the connection closes). */
  release (): void {
    clearInterval(this.#timer)
    heldHere.delete(this.#token)
    if (!this.#db.open) return
    try {
      this.#db.prepare('DELETE FROM file_holder WHERE id = 1 AND token = ?').run(this.#token)
    } catch {
      // The row stays; the next process takes it over as stale (this pid no longer runs).
    }
  }
}
