import type { GrantRecord, GrantStore } from '../types.ts'
import type { PostgresRunner } from './postgres-connection.ts'

/** Sealed grants in the `grants` table, one row per (principal, upstream); the text of `sealed` is opaque here. */
export class PostgresGrantStore implements GrantStore {
  readonly #db: PostgresRunner
  readonly #s: string

  constructor (db: PostgresRunner, schema: string) {
    this.#db = db
    this.#s = `"${schema}"`
  }

  async put (record: GrantRecord): Promise<void> {
    await this.#db.rows(`INSERT INTO ${this.#s}.grants (principal, upstream, sealed, expires_at) VALUES ($1, $2, $3, $4)
      ON CONFLICT (principal, upstream) DO UPDATE SET sealed = excluded.sealed, expires_at = excluded.expires_at`,
    [record.principal, record.upstream, record.sealed, record.expiresAt], 'gw_grant_put')
  }

  async get (principal: string, upstream: string, now: number): Promise<GrantRecord | null> {
    const [row] = await this.#db.rows<{ sealed: string, expires_at: string }>(
      `SELECT sealed, expires_at FROM ${this.#s}.grants WHERE principal = $1 AND upstream = $2 AND expires_at > $3`,
      [principal, upstream, now], 'gw_grant_get')
    return row === undefined ? null : { principal, upstream, sealed: row.sealed, expiresAt: Number(row.expires_at) }
  }

  async delete (principal: string, upstream: string, sealed?: string): Promise<boolean> {
    const rows = await this.#db.rows(`DELETE FROM ${this.#s}.grants WHERE principal = $1 AND upstream = $2 AND ($3::text IS NULL OR sealed = $3)
      RETURNING 1`, [principal, upstream, sealed ?? null], 'gw_grant_delete')
    return rows.length > 0
  }

  async sweep (now: number): Promise<number> {
    const rows = await this.#db.rows(`DELETE FROM ${this.#s}.grants WHERE expires_at <= $1 RETURNING 1`, [now])
    return rows.length
  }
}
