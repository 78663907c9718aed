import type { HomeStore, LeaseStore } from '../types.ts'
import type { PostgresRunner } from './postgres-connection.ts'

/** How often a claim is tried again when the home it lost to was released before it could read it. */
const CLAIM_ATTEMPTS = 5

/** `$n` milliseconds from now on the server's clock: every process agrees on when a home lapses. */
function fromNow (n: number): string {
  return `clock_timestamp() + $${n}::float8 * interval '1 millisecond'`
}

/** Client homes in the `homes` table: each a process's name and when it lapses (the server's clock); every change a compare-and-set. */
export class PostgresHomeStore implements HomeStore {
  readonly #db: PostgresRunner
  readonly #s: string

  constructor (db: PostgresRunner, schema: string) {
    this.#db = db
    this.#s = `"${schema}"`
  }

  async claim (client: string, from: string | null, to: string, ttlMs: number): Promise<string> {
    const s = this.#s
    for (let attempt = 1; ; attempt++) {
      // Taken when there is no home, it lapsed, or it is `from` or already `to` (a racing claim waits for the row's
      // lock and then sees the winner's home: not `from` any more).
      const [taken] = await this.#db.rows<{ home: string }>(`INSERT INTO ${s}.homes AS h (client, home, expires_at)
          VALUES ($1, $3, ${fromNow(4)})
        ON CONFLICT (client) DO UPDATE SET home = excluded.home, expires_at = excluded.expires_at
          WHERE h.expires_at <= clock_timestamp() OR h.home = $2 OR h.home = $3
        RETURNING home`, [client, from, to, Math.max(1, Math.round(ttlMs))], 'gw_home_claim')
      if (taken !== undefined) return taken.home
      // Another home holds it: read it in a statement of its own, which sees what the winner committed.
      const [held] = await this.#db.rows<{ home: string }>(`SELECT home FROM ${s}.homes WHERE client = $1`, [client], 'gw_home_get')
      if (held !== undefined || attempt === CLAIM_ATTEMPTS) return held?.home ?? to
    }
  }

  async renew (home: string, clients: readonly string[], ttlMs: number): Promise<string[]> {
    if (clients.length === 0) return []
    const rows = await this.#db.rows<{ client: string }>(`UPDATE ${this.#s}.homes SET expires_at = ${fromNow(3)}
      WHERE client = ANY($1::text[]) AND home = $2 AND expires_at > clock_timestamp() RETURNING client`,
    [clients, home, Math.max(1, Math.round(ttlMs))])
    const kept = new Set(rows.map((row) => row.client))
    return clients.filter((client) => !kept.has(client))
  }

  async release (client: string, home: string): Promise<void> {
    await this.#db.rows(`DELETE FROM ${this.#s}.homes WHERE client = $1 AND home = $2`, [client, home])
  }
}

/** Process leases in the `leases` table: each process's id and the end of its lease (epoch ms, the caller's clock). */
export class PostgresLeaseStore implements LeaseStore {
  readonly #db: PostgresRunner
  readonly #s: string

  constructor (db: PostgresRunner, schema: string) {
    this.#db = db
    this.#s = `"${schema}"`
  }

  async renew (owner: string, until: number): Promise<void> {
    await this.#db.rows(`INSERT INTO ${this.#s}.leases (owner, until) VALUES ($1, $2) ON CONFLICT (owner) DO UPDATE SET until = excluded.until`, [owner, until])
  }

  async alive (owner: string, now: number): Promise<boolean> {
    return (await this.#db.rows(`SELECT 1 FROM ${this.#s}.leases WHERE owner = $1 AND until > $2`, [owner, now])).length > 0
  }

  async lapsed (now: number): Promise<string[]> {
    return (await this.#db.rows<{ owner: string }>(`SELECT owner FROM ${this.#s}.leases WHERE until <= $1 ORDER BY until`, [now])).map((row) => row.owner)
  }

  async release (owner: string): Promise<void> {
    await this.#db.rows(`DELETE FROM ${this.#s}.leases WHERE owner = $1`, [owner])
  }
}
