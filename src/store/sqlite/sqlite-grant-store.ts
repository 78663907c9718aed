import type Database from 'better-sqlite3'
import type { GrantRecord, GrantStore } from '../types.ts'
import { backend } from './sqlite-rows.ts'

interface GrantRow {
  principal: string
  upstream: string
  sealed: string
  expires_at: number
}

/** Sealed grants in the `grants` table, one row per (principal, upstream); the text of `sealed` is opaque here. */
export class SqliteGrantStore implements GrantStore {
  readonly #put: Database.Statement<[GrantRow]>
  readonly #get: Database.Statement<[string, string, number], GrantRow>
  readonly #delete: Database.Statement<[string, string]>
  readonly #deleteSealed: Database.Statement<[string, string, string]>
  readonly #sweep: Database.Statement<[number]>

  constructor (db: Database.Database) {
    this.#put = db.prepare(`INSERT INTO grants (principal, upstream, sealed, expires_at) VALUES (@principal, @upstream, @sealed, @expires_at)
      ON CONFLICT (principal, upstream) DO UPDATE SET sealed = excluded.sealed, expires_at = excluded.expires_at`)
    this.#get = db.prepare('SELECT * FROM grants WHERE principal = ? AND upstream = ? AND expires_at > ?')
    this.#delete = db.prepare('DELETE FROM grants WHERE principal = ? AND upstream = ?')
    this.#deleteSealed = db.prepare('DELETE FROM grants WHERE principal = ? AND upstream = ? AND sealed = ?')
    this.#sweep = db.prepare('DELETE FROM grants WHERE expires_at <= ?')
  }

  async put (record: GrantRecord): Promise<void> {
    const { principal, upstream, sealed, expiresAt } = record
    backend(() => this.#put.run({ principal, upstream, sealed, expires_at: expiresAt }))
  }

  async get (principal: string, upstream: string, now: number): Promise<GrantRecord | null> {
    const row = backend(() => this.#get.get(principal, upstream, now))
    return row === undefined ? null : { principal: row.principal, upstream: row.upstream, sealed: row.sealed, expiresAt: row.expires_at }
  }

  async delete (principal: string, upstream: string, sealed?: string): Promise<boolean> {
    const gone = sealed === undefined
      ? backend(() => this.#delete.run(principal, upstream))
      : backend(() => this.#deleteSealed.run(principal, upstream, sealed))
    return gone.changes > 0
  }

  async sweep (now: number): Promise<number> {
    return backend(() => this.#sweep.run(now)).changes
  }
}
