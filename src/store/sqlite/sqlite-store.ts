import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import Database from 'better-sqlite3'
import { GatewayError } from '../../errors.ts'
import type { GatewayStore, SessionCreateOptions, SessionRecord, SessionStore, StoreHealth } from '../types.ts'
import { MemoryRateLimits } from '../memory/memory-rate-limits.ts'
import { MemoryBus } from '../memory/memory-bus.ts'
import { MemoryLeaseStore } from '../memory/memory-store.ts'
import { migrate } from './sqlite-schema.ts'
import { Checkpointer, WAL_SIZE_LIMIT_BYTES } from './checkpointer.ts'
import { SqliteTaskStore } from './sqlite-task-store.ts'
import { SqliteFileLock, type SqliteFileLockOptions } from './sqlite-file-lock.ts'
import { MemoryHomeStore } from '../memory/memory-homes.ts'
import { RecentRecords } from '../recent-records.ts'
import { sessionBytes } from '../stored-bytes.ts'
import type { SqliteAccountBytes } from './sqlite-account-bytes.ts'
import { WriteRefusals } from '../write-refusals.ts'

/** A SQLite failure that means the file cannot grow: the disk (or the file's size limit) is full. */
export function sqliteRefusal (err: unknown): string | undefined {
  const backend: unknown = err instanceof GatewayError ? err.cause : err
  return backend instanceof Database.SqliteError && backend.code === 'SQLITE_FULL'
    ? 'SQLite refuses writes: the database or disk is full (SQLITE_FULL)'
    : undefined
}

interface SessionRow {
  id: string
  principal: string
  protocol_version: string
  client_capabilities: string
  client_info: string
  created_at: number
  last_seen_at: number
}

/** The parameters of a session's insert. */
interface SessionInsert extends Omit<SessionRecord, 'clientCapabilities' | 'clientInfo'> {
  clientCapabilities: string
  clientInfo: string
  account: string
  bytes: number
}

/** How many recently used sessions the store keeps in memory. */
const RECENT_SESSIONS = 4096
const RECENT_SESSIONS_BYTES = 8 * 1024 * 1024

function toSession (row: SessionRow): SessionRecord {
  return {
    id: row.id,
    principal: row.principal,
    protocolVersion: row.protocol_version,
    clientCapabilities: JSON.parse(row.client_capabilities) as SessionRecord['clientCapabilities'],
    clientInfo: JSON.parse(row.client_info) as SessionRecord['clientInfo'],
    createdAt: row.created_at,
    lastSeenAt: row.last_seen_at,
  }
}

class SqliteSessionStore implements SessionStore {
  readonly #select: Database.Statement<[string], SessionRow>
  readonly #touch: Database.Statement
  readonly #count: Database.Statement<[{ account: string, limit: number }], { count: number }>
  readonly #create: Database.Transaction<(row: SessionInsert, options: SessionCreateOptions) => void>
  readonly #delete: Database.Transaction<(id: string) => boolean>
  readonly #sweep: Database.Transaction<(before: number) => string[]>
  /** Sessions read lately: a 2025-11-25 request finds its session here without a query (one writer per file). */
  readonly #recent = new RecentRecords<SessionRecord>(RECENT_SESSIONS, RECENT_SESSIONS_BYTES)

  /** `bytes`: the stored bytes of each account, which a session's client capabilities and info count into. */
  constructor (db: Database.Database, bytes: SqliteAccountBytes) {
    const insert = db.prepare<[SessionInsert]>(`INSERT INTO sessions (id, principal, protocol_version, client_capabilities, client_info,
        created_at, last_seen_at, account, bytes)
      VALUES (@id, @principal, @protocolVersion, @clientCapabilities, @clientInfo, @createdAt, @lastSeenAt, @account, @bytes)`)
    this.#select = db.prepare('SELECT * FROM sessions WHERE id = ?')
    this.#touch = db.prepare('UPDATE sessions SET last_seen_at = ? WHERE id = ? AND last_seen_at < ?')
    const remove = db.prepare<[string], { account: string | null, principal: string, bytes: number }>(
      'DELETE FROM sessions WHERE id = ? RETURNING account, principal, bytes')
    const expire = db.prepare<[number], { id: string, account: string | null, principal: string, bytes: number }>(
      'DELETE FROM sessions WHERE last_seen_at < ? RETURNING id, account, principal, bytes')
    this.#count = db.prepare('SELECT COUNT(*) AS count FROM (SELECT 1 FROM sessions WHERE account = @account LIMIT @limit)')
    this.#create = db.transaction((row: SessionInsert, { maxSessions, maxStoredBytes }: SessionCreateOptions) => {
      if (maxSessions !== undefined && this.#count.get({ account: row.account, limit: maxSessions })!.count >= maxSessions) {
        throw new GatewayError('GW_ERR_SESSION_LIMIT', [maxSessions])
      }
      bytes.check(row.account, row.bytes, maxStoredBytes)
      insert.run(row)
      bytes.addTo(row.account, row.bytes)
    })
    this.#delete = db.transaction((id: string) => {
      const gone = remove.get(id)
      if (gone) bytes.addTo(gone.account ?? gone.principal, -gone.bytes)
      return gone !== undefined
    })
    this.#sweep = db.transaction((before: number) => {
      const gone = expire.all(before)
      for (const row of gone) bytes.addTo(row.account ?? row.principal, -row.bytes)
      return gone.map((row) => row.id)
    })
  }

  async create (session: SessionRecord, options: SessionCreateOptions = {}): Promise<void> {
    const row: SessionInsert = {
      ...session,
      account: options.account ?? session.principal,
      clientCapabilities: JSON.stringify(session.clientCapabilities),
      clientInfo: JSON.stringify(session.clientInfo),
      bytes: sessionBytes(session),
    }
    // IMMEDIATE: the checks of the limits and the insert hold the write lock together.
    this.#create.immediate(row, options)
  }

  async get (id: string): Promise<SessionRecord | null> {
    const recent = this.#recent.get(id)
    if (recent !== undefined) return recent
    const row = this.#select.get(id)
    return row ? this.#recent.set(id, toSession(row), row.client_capabilities.length + row.client_info.length) : null
  }

  async touch (id: string, at: number): Promise<void> {
    if (this.#touch.run(at, id, at).changes === 0) return
    this.#recent.update(id, (recent) => ({ ...recent, lastSeenAt: at }))
  }

  async delete (id: string): Promise<boolean> {
    this.#recent.delete(id)
    return this.#delete.immediate(id)
  }

  async sweep (before: number): Promise<string[]> {
    const ids = this.#sweep.immediate(before)
    for (const id of ids) this.#recent.delete(id)
    return ids
  }

  async countOf (account: string, atMost: number): Promise<number> {
    return this.#count.get({ account, limit: atMost })!.count
  }
}

/** The embedded default: one SQLite file (WAL mode) that survives restarts. One process per file (SqliteFileLock). */
export class SqliteStore implements GatewayStore {
  readonly kind = 'sqlite'
  /** One process per file: after a restart, nothing the file names can still be running. */
  readonly shared = false
  readonly durable = true
  readonly sessions: SqliteSessionStore
  readonly tasks: SqliteTaskStore
  readonly bus = new MemoryBus()
  readonly leases = new MemoryLeaseStore()
  readonly homes = new MemoryHomeStore()
  /** In process: one process per file, so its buckets need not be shared (nor survive a restart). */
  readonly rateLimits = new MemoryRateLimits()
  readonly #db: Database.Database
  readonly #checkpointer: Checkpointer | undefined
  readonly #lock: SqliteFileLock | undefined
  readonly #refusals: WriteRefusals

  /**
   * Throws GW_ERR_STORE_LOCKED when another live gateway process holds the file. `refusals` hears when writes
   * begin to be refused (a full disk) and when they are accepted again.
   */
  constructor (path: string, options: { lock?: SqliteFileLockOptions, refusals?: WriteRefusals } = {}) {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true })
    this.#db = new Database(path)
    // Freed pages (swept tasks) can be given back to the file system; takes effect on a new file only.
    this.#db.pragma('auto_vacuum = INCREMENTAL')
    this.#db.pragma('journal_mode = WAL')
    this.#db.pragma('synchronous = NORMAL')
    this.#db.pragma('busy_timeout = 5000')
    this.#db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`)
    try {
      // Held before anything else touches the file: migrations and restart recovery included.
      if (path !== ':memory:') this.#lock = new SqliteFileLock(this.#db, path, options.lock)
      // A file written before incremental vacuum was on is rewritten once (its size, once, at start-up).
      if (this.#db.pragma('auto_vacuum', { simple: true }) !== 2) this.#db.exec('VACUUM')
      migrate(this.#db)
    } catch (err) {
      this.#lock?.release()
      this.#db.close()
      throw err
    }
    this.#refusals = options.refusals ?? new WriteRefusals()
    const tasks = new SqliteTaskStore(this.#db)
    this.tasks = this.#refusals.watch(tasks, 'tasks', sqliteRefusal)
    this.sessions = this.#refusals.watch(new SqliteSessionStore(this.#db, tasks.accountBytes), 'sessions', sqliteRefusal)
    if (path !== ':memory:') {
      this.#db.pragma('wal_autocheckpoint = 0')
      this.#checkpointer = new Checkpointer(path)
    }
  }

  async health (): Promise<StoreHealth> {
    try {
      this.#db.prepare('SELECT 1').get()
      const lost = this.#lock?.lost
      return this.#refusals.health(lost === undefined ? { ok: true, kind: this.kind } : { ok: false, kind: this.kind, detail: lost })
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
