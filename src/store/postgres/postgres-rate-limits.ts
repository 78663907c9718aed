import type { RateLimitStore } from '../types.ts'
import type { PostgresRunner } from './postgres-connection.ts'

/** Milliseconds now on the server's clock: processes whose own clocks disagree still share one bucket exactly. */
const NOW_MS = 'extract(epoch FROM clock_timestamp())::float8 * 1000'

/** The tokens of bucket row `b` at `now` (ms), refilled at $2 per second up to $3 (token-bucket.ts's `refilled`). */
function refilled (now: string): string {
  return `least($3::float8, CASE WHEN ${now} > b.at THEN b.tokens + (${now} - b.at) * $2::float8 / 1000 ELSE b.tokens END)`
}

/** How many of the $4 takes of a batch a bucket holding `tokens` grants. */
function granted (tokens: string): string {
  return `least($4::float8, floor(${tokens}))`
}

/** Attempts of a batch whose refusal found the bucket refilled or forgotten between its two statements. */
const ATTEMPTS = 3

/** The takes of one bucket asked for in one turn of the event loop, answered together. */
interface Batch {
  key: string
  rate: number
  burst: number
  waiters: Array<{ resolve: (waitMs: number) => void, reject: (err: unknown) => void }>
}

/**
 * Token buckets in the `rate_buckets` table (token-bucket.ts's arithmetic, on the server's clock). The takes of one
 * bucket asked for in one turn of the event loop are one statement, at one reading of the clock: an insert of a
 * full bucket less what they take, or, for a bucket that exists, an update that happens only when the refilled
 * bucket holds a token (the row's lock makes racing statements of other processes queue). A refusal then reads the
 * wait. Each write records when the bucket is full again; a sweep forgets the buckets that are.
 */
export class PostgresRateLimits implements RateLimitStore {
  readonly #db: PostgresRunner
  readonly #s: string
  readonly #batches = new Map<string, Batch>()

  constructor (db: PostgresRunner, schema: string) {
    this.#db = db
    this.#s = `"${schema}"`
  }

  async take (key: string, rate: number, burst: number): Promise<number> {
    return await new Promise<number>((resolve, reject) => {
      const id = `${rate}:${burst}:${key}`
      let batch = this.#batches.get(id)
      if (batch === undefined) {
        const opened: Batch = batch = { key, rate, burst, waiters: [] }
        this.#batches.set(id, opened)
        queueMicrotask(() => {
          this.#batches.delete(id)
          this.#answer(opened).catch((err: unknown) => { for (const waiter of opened.waiters) waiter.reject(err) })
        })
      }
      batch.waiters.push({ resolve, reject })
    })
  }

  /** The first waiters get the tokens taken (0), the others the wait for the next token. */
  async #answer (batch: Batch): Promise<void> {
    const { taken, tokens } = await this.#take(batch)
    const wait = Math.max(1, Math.ceil((1 - Math.min(tokens, 1 - 1e-9)) * 1000 / batch.rate))
    batch.waiters.forEach((waiter, i) => waiter.resolve(i < taken ? 0 : wait))
  }

  async #take ({ key, rate, burst, waiters }: Batch): Promise<{ taken: number, tokens: number }> {
    const s = this.#s
    const values = [key, rate, burst, waiters.length]
    for (let attempt = 1; ; attempt++) {
      const [taken] = await this.#db.rows<{ taken: number, tokens: number }>(`WITH now AS (SELECT ${NOW_MS} AS ms)
        INSERT INTO ${s}.rate_buckets AS b (key, tokens, at, full_at, taken)
          SELECT $1, $3::float8 - ${granted('$3::float8')}, ms, ms + ${granted('$3::float8')} * 1000 / $2::float8, ${granted('$3::float8')} FROM now
        ON CONFLICT (key) DO UPDATE SET taken = ${granted(refilled('excluded.at'))},
          tokens = ${refilled('excluded.at')} - ${granted(refilled('excluded.at'))}, at = greatest(b.at, excluded.at),
          full_at = greatest(b.at, excluded.at) + ($3::float8 - ${refilled('excluded.at')} + ${granted(refilled('excluded.at'))}) * 1000 / $2::float8
        WHERE ${refilled('excluded.at')} >= 1
        RETURNING taken, tokens`, values, 'gw_rate_take')
      if (taken !== undefined) return taken
      const [row] = await this.#db.rows<{ tokens: number }>(`SELECT ${refilled('now.ms')} AS tokens
        FROM ${s}.rate_buckets AS b, (SELECT ${NOW_MS} AS ms) AS now WHERE b.key = $1`, values.slice(0, 3), 'gw_rate_wait')
      if ((row === undefined || row.tokens >= 1) && attempt < ATTEMPTS) continue
      return { taken: 0, tokens: row?.tokens ?? 0 }
    }
  }
}
