import type Database from 'better-sqlite3'
import { GatewayError } from '../../errors.ts'
import type { SessionCreateOptions, SessionRecord, SessionStore } from '../types.ts'
import { RecentRecords } from '../recent-records.ts'
import { sessionBytes } from '../stored-bytes.ts'
import type { SqliteAccountBytes } from './sqlite-account-bytes.ts'

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

/** Sessions in the `sessions` table; their client capabilities and info count into their account's stored bytes. */
export class SqliteSessionStore implements SessionStore {
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
