import { randomUUID } from 'node:crypto'
import { GatewayError } from '../../errors.ts'
import type { Logger } from '../../observability/logger.ts'
import type { GatewayStore, StoreHealth } from '../types.ts'
import { connectionConfig, PostgresRunner, type PostgresConnectionOptions } from './postgres-connection.ts'
import { PostgresBus } from './postgres-bus.ts'
import { PostgresHomeStore, PostgresLeaseStore } from './postgres-homes.ts'
import { PostgresRateLimits } from './postgres-rate-limits.ts'
import { PostgresGrantStore } from './postgres-grants.ts'
import { migrate, SCHEMA_NAME } from './postgres-schema.ts'
import { PostgresSessionStore } from './postgres-sessions.ts'
import { PostgresTaskStore } from './postgres-task-store.ts'
import { unavailable } from './postgres-errors.ts'

export interface PostgresStoreOptions extends PostgresConnectionOptions {
  /** The schema of the store's tables: processes that share tasks use the same one. */
  schema: string
  /** Connections of the pool at most (store.poolSize). */
  poolSize: number
  /** Longest wait for a free connection before a statement is refused (store.acquireTimeout, ms). */
  acquireTimeout: number
  /** Told when connections are lost (they are replaced by themselves). */
  log?: Logger
}

/**
 * The shared, durable store on PostgreSQL: several gateway processes on one schema of one database. Every
 * statement runs on a pool of connections; a lost connection is replaced by the next statement that needs one,
 * and meanwhile statements fail at once with GW_ERR_STORE_UNAVAILABLE (clients get 503 with Retry-After). The
 * schema is created and migrated by ready(), under an advisory lock (postgres-schema.ts).
 */
export class PostgresStore implements GatewayStore {
  readonly kind = 'postgres'
  readonly shared = true
  readonly durable = true
  readonly sessions: PostgresSessionStore
  readonly tasks: PostgresTaskStore
  readonly bus: PostgresBus
  readonly leases: PostgresLeaseStore
  readonly homes: PostgresHomeStore
  readonly rateLimits: PostgresRateLimits
  readonly grants: PostgresGrantStore
  readonly #db: PostgresRunner
  readonly #schema: string
  #closed: Promise<void> | undefined

  constructor (options: PostgresStoreOptions) {
    if (!SCHEMA_NAME.test(options.schema)) {
      throw new GatewayError('GW_ERR_STORE_UNAVAILABLE', [`store.schema '${options.schema}' is not a plain SQL identifier (lower-case letters, digits and _)`])
    }
    const connection = connectionConfig(options)
    this.#schema = options.schema
    this.#db = new PostgresRunner(connection, options.poolSize, options.acquireTimeout, options.log)
    this.sessions = new PostgresSessionStore(this.#db, options.schema)
    this.tasks = new PostgresTaskStore(this.#db, options.schema)
    this.leases = new PostgresLeaseStore(this.#db, options.schema)
    this.homes = new PostgresHomeStore(this.#db, options.schema)
    this.rateLimits = new PostgresRateLimits(this.#db, options.schema)
    this.grants = new PostgresGrantStore(this.#db, options.schema)
    this.bus = new PostgresBus({
      pool: this.#db.pool,
      connection,
      schema: options.schema,
      processId: randomUUID(),
      ...(options.log !== undefined && { log: options.log }),
    })
  }

  /**
   * Migrates the schema (or refuses one a newer gateway wrote: GW_ERR_STORE_SCHEMA), opens the pool's connections
   * and starts the bus; fails with
   * GW_ERR_STORE_UNAVAILABLE when PostgreSQL cannot be reached.
   */
  async ready (): Promise<void> {
    await migrate(this.#db, this.#schema)
    await this.#db.warm()
    try {
      await this.bus.start()
    } catch (err) {
      throw unavailable(err)
    }
  }

  /** PostgreSQL answers a statement on the pool (within store.acquireTimeout for a connection). */
  async health (): Promise<StoreHealth> {
    try {
      await this.#db.rows('SELECT 1', [], 'gw_health')
      return { ok: true, kind: this.kind }
    } catch (err) {
      // The gateway's own message, as for every store error; the driver's (which may name hosts) stays out.
      return { ok: false, kind: this.kind, detail: unavailable(err).message }
    }
  }

  async close (): Promise<void> {
    this.#closed ??= (async () => {
      await this.bus.close()
      await this.#db.end()
    })()
    await this.#closed
  }
}
