import { readFileSync } from 'node:fs'
import pg from 'pg'
import { GatewayError } from '../../errors.ts'
import type { Logger } from '../../observability/logger.ts'
import { isLost, isRetryable, OutageLog, unavailable } from './postgres-errors.ts'

/** What the store needs to reach PostgreSQL (store.* of the configuration). */
export interface PostgresConnectionOptions {
  /** postgres:// or postgresql://; TLS with `?sslmode=require` or `verify-full` (both verify the certificate). */
  url: string
  /** The password when the url carries none. */
  password?: string
  /** PEM file of the CA that signed the server's certificate (TLS with a private CA). */
  caFile?: string
}

/** Longest a statement may go unanswered before the connection counts as lost (a server that stopped answering). */
const QUERY_TIMEOUT_MS = 15_000
/** Transactions that lost a deadlock or a serialization race are run again this many times before the failure is told. */
const RETRIES = 3
const OID_INT8 = 20

/** int8 columns and counts as JavaScript numbers: every one the store writes is an epoch millisecond, a count or bytes. */
const TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => oid === OID_INT8 ? Number : pg.types.getTypeParser(oid, format ?? 'text')) as pg.CustomTypesConfig['getTypeParser'],
}

function readCa (file: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch (err) {
    throw new GatewayError('GW_ERR_STORE_UNAVAILABLE', [`store.caFile '${file}' cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`], { cause: err })
  }
}

/**
 * The settings of every connection, from the url: host, port, user, password and database; `sslmode` there turns
 * TLS on (`require` and `verify-full` alike verify the server's certificate and name, against the system's CAs or
 * `caFile`; `disable`, or none, is plain TCP); `host` in the query names a Unix socket directory.
 */
export function connectionConfig (options: PostgresConnectionOptions): pg.ClientConfig {
  const url = new URL(options.url)
  const sslmode = url.searchParams.get('sslmode') ?? 'disable'
  const tls = sslmode !== 'disable'
  const socketDir = url.searchParams.get('host')
  const user = decodeURIComponent(url.username)
  const password = url.password === '' ? options.password : decodeURIComponent(url.password)
  return {
    host: socketDir ?? (url.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1'),
    port: url.port === '' ? 5432 : Number(url.port),
    database: decodeURIComponent(url.pathname.slice(1)) || 'postgres',
    ...(user !== '' && { user }),
    ...(password !== undefined && { password }),
    ssl: tls ? { rejectUnauthorized: true, ...(options.caFile !== undefined && { ca: readCa(options.caFile) }) } : false,
    application_name: url.searchParams.get('application_name') ?? 'mcp-task-gateway',
    keepAlive: true,
    query_timeout: QUERY_TIMEOUT_MS,
    types: TYPES,
  }
}

/** A statement of a transaction: resolves with its rows. */
export type Query = <R extends object = Record<string, unknown>>(text: string, values?: unknown[]) => Promise<R[]>

/**
 * Every statement of the store goes through here: on the pool, with a connection taken for at most `acquireMs`
 * (a pool whose `size` connections are all in use refuses the statement, saying so, instead of queueing it
 * without bound), and every driver error turned into GW_ERR_STORE_UNAVAILABLE (postgres-errors.ts).
 */
export class PostgresRunner {
  readonly pool: pg.Pool
  readonly #size: number
  readonly #acquireMs: number
  readonly #outage: OutageLog

  constructor (config: pg.ClientConfig, size: number, acquireMs: number, log?: Logger) {
    this.#size = size
    this.#acquireMs = acquireMs
    // Connections stay open once made (idleTimeoutMillis 0): a burst of requests never waits for new ones.
    this.pool = new pg.Pool({ ...config, max: size, connectionTimeoutMillis: acquireMs, idleTimeoutMillis: 0 })
    // An idle connection the server ended (a restart, pg_terminate_backend) leaves the pool; the next statement opens
    // another. Without a listener the error would end the process.
    this.#outage = new OutageLog(log)
    this.pool.on('error', (err) => { this.#outage.failed(err) })
  }

  /**
   * The rows of one statement; a `name` makes it a prepared statement, parsed once per connection. A read (a
   * SELECT) that met a connection the server had ended (a restart, pg_terminate_backend) before the pool noticed
   * runs once more, on another connection: it changed nothing. A write is told (the client tries again).
   */
  async rows<R extends object = Record<string, unknown>> (text: string, values: unknown[] = [], name?: string): Promise<R[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        const { rows } = await this.pool.query<R>({ text, values, ...(name !== undefined && { name }) })
        this.#outage.succeeded()
        return rows
      } catch (err) {
        if (attempt === 1 && text.startsWith('SELECT') && isLost(err)) continue
        throw this.#unavailable(err)
      }
    }
  }

  /**
   * Runs `work` in one transaction on one connection, which goes back to the pool afterwards whatever happens (a
   * connection that failed is closed instead). A transaction the server aborted to break a deadlock runs again.
   */
  async transaction<T> (work: (query: Query) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      let client: pg.PoolClient
      try {
        client = await this.pool.connect()
      } catch (err) {
        throw this.#unavailable(err)
      }
      let broken: Error | undefined
      // While checked out, a connection's errors (the server ending it: a restart, kill -9, pg_terminate_backend)
      // are emitted on it, no longer on the pool: without a listener one would end the process. The statement in
      // flight fails with the error too; the connection is then closed instead of going back to the pool.
      const lost = (err: Error): void => { broken = err }
      client.on('error', lost)
      try {
        await client.query('BEGIN')
        const query: Query = async <R extends object>(text: string, values: unknown[] = []) => (await client.query<R>(text, values)).rows
        const result = await work(query)
        await client.query('COMMIT')
        this.#outage.succeeded()
        return result
      } catch (err) {
        await client.query('ROLLBACK').catch((rollback: unknown) => { broken = rollback as Error })
        if (isRetryable(err) && attempt < RETRIES) continue
        throw this.#unavailable(err)
      } finally {
        client.off('error', lost)
        client.release(broken)
      }
    }
  }

  /** Opens every connection of the pool now, so that the first burst of statements finds them ready. */
  async warm (): Promise<void> {
    const clients: pg.PoolClient[] = []
    try {
      for (const client of await Promise.allSettled(Array.from({ length: this.#size }, async () => await this.pool.connect()))) {
        if (client.status === 'fulfilled') clients.push(client.value)
        else throw client.reason
      }
    } catch (err) {
      throw this.#unavailable(err)
    } finally {
      for (const client of clients) client.release()
    }
  }

  async end (): Promise<void> {
    await this.pool.end()
  }

  #unavailable (err: unknown): Error {
    this.#outage.failed(err)
    return unavailable(err, { size: this.#size, acquireMs: this.#acquireMs, open: this.pool.totalCount })
  }
}
