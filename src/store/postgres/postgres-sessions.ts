import { GatewayError } from '../../errors.ts'
import { overBudget, sessionBytes } from '../stored-bytes.ts'
import type { SessionCreateOptions, SessionRecord, SessionStore } from '../types.ts'
import type { PostgresRunner } from './postgres-connection.ts'
import { ReadBatch } from './postgres-read-batch.ts'

/** The columns a session is inserted with. */
const FIELDS = 'id, principal, protocol_version, client_capabilities, client_info, created_at, last_seen_at'
/**
 * A session read as one text column `t`, the JSON of the record itself (its JSON columns in it as JSON): the driver
 * describes one value and hands its text over, parsed once by its reader (the lookup of every request of a client
 * with a session).
 */
const SESSION_TEXT = `json_build_object('id', id, 'principal', principal, 'protocolVersion', protocol_version,
  'clientCapabilities', client_capabilities::json, 'clientInfo', client_info::json, 'createdAt', created_at, 'lastSeenAt', last_seen_at)::text AS t`
/** Sessions deleted per statement of a sweep. */
const SWEEP_BATCH = 500

/**
 * Sessions in the `sessions` table; their client capabilities and info count into their account's stored bytes,
 * and a creation locks the account's row (as a task's does), so that the account's limits hold between processes.
 */
export class PostgresSessionStore implements SessionStore {
  readonly #db: PostgresRunner
  readonly #s: string
  readonly #byId: ReadBatch

  constructor (db: PostgresRunner, schema: string) {
    this.#db = db
    this.#s = `"${schema}"`
    this.#byId = new ReadBatch(async (ids) => await db.rows<{ id: string, t: string }>(
      `SELECT id, ${SESSION_TEXT} FROM ${this.#s}.sessions WHERE id = ANY($1::text[])`, [ids], 'gw_session_get'))
  }

  async create (session: SessionRecord, options: SessionCreateOptions = {}): Promise<void> {
    const s = this.#s
    const account = options.account ?? session.principal
    const bytes = sessionBytes(session)
    await this.#db.transaction(async (query) => {
      const [held] = await query<{ bytes: number }>(`INSERT INTO ${s}.accounts AS a (account) VALUES ($1)
        ON CONFLICT (account) DO UPDATE SET bytes = a.bytes RETURNING bytes`, [account])
      if (options.maxSessions !== undefined) {
        const [{ count } = { count: 0 }] = await query<{ count: number }>(`SELECT count(*) AS count FROM (SELECT 1 FROM ${s}.sessions
          WHERE account = $1 LIMIT $2) AS held`, [account, options.maxSessions])
        if (count >= options.maxSessions) throw new GatewayError('GW_ERR_SESSION_LIMIT', [options.maxSessions])
      }
      const refusal = overBudget(held?.bytes ?? 0, bytes, options.maxStoredBytes)
      if (refusal) throw refusal
      await query(`WITH inserted AS (INSERT INTO ${s}.sessions (${FIELDS}, account, bytes) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)),
          counted AS (UPDATE ${s}.accounts SET bytes = bytes + $9 WHERE account = $8)
        SELECT 1`, [
        session.id, session.principal, session.protocolVersion, JSON.stringify(session.clientCapabilities),
        JSON.stringify(session.clientInfo), session.createdAt, session.lastSeenAt, account, bytes,
      ])
    })
  }

  /** One round trip, shared with the other session reads of the same turn (ReadBatch). */
  async get (id: string): Promise<SessionRecord | null> {
    const text = await this.#byId.read(id)
    return text === undefined ? null : JSON.parse(text) as SessionRecord
  }

  /** lastSeenAt only moves forward. */
  async touch (id: string, at: number): Promise<void> {
    await this.#db.rows(`UPDATE ${this.#s}.sessions SET last_seen_at = $2 WHERE id = $1 AND last_seen_at < $2`, [id, at], 'gw_session_touch')
  }

  /** One statement: of two racing deletes of a session, one counts it (and its bytes). */
  async delete (id: string): Promise<boolean> {
    const s = this.#s
    const [row] = await this.#db.rows<{ count: number }>(`WITH gone AS (DELETE FROM ${s}.sessions WHERE id = $1 RETURNING account, bytes),
        counted AS (UPDATE ${s}.accounts AS a SET bytes = a.bytes - gone.bytes FROM gone WHERE a.account = gone.account)
      SELECT count(*) AS count FROM gone`, [id])
    return (row?.count ?? 0) > 0
  }

  async sweep (before: number): Promise<string[]> {
    const s = this.#s
    const ids: string[] = []
    for (;;) {
      const rows = await this.#db.rows<{ id: string }>(`WITH gone AS (DELETE FROM ${s}.sessions WHERE id IN (
            SELECT id FROM ${s}.sessions WHERE last_seen_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING id, account, bytes),
          counted AS (UPDATE ${s}.accounts AS a SET bytes = a.bytes - freed.bytes
            FROM (SELECT account, sum(bytes) AS bytes FROM gone GROUP BY account) AS freed WHERE a.account = freed.account)
        SELECT id FROM gone`, [before, SWEEP_BATCH])
      for (const row of rows) ids.push(row.id)
      if (rows.length < SWEEP_BATCH) return ids
    }
  }

  async countOf (account: string, atMost: number): Promise<number> {
    const [row] = await this.#db.rows<{ count: number }>(`SELECT count(*) AS count FROM (SELECT 1 FROM ${this.#s}.sessions
      WHERE account = $1 LIMIT $2) AS held`, [account, atMost])
    return row?.count ?? 0
  }
}
