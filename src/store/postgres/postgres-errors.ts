import pg from 'pg'
import { GatewayError } from '../../errors.ts'
import type { Logger } from '../../observability/logger.ts'

/** SQLSTATE classes and codes that mean the server is gone or going, not that a statement was wrong. */
const UNREACHABLE = /^(08|57P0[1-3])/

/** The message of pg-pool when no connection came within connectionTimeoutMillis. */
const ACQUIRE_TIMEOUT = 'timeout exceeded when trying to connect'

/** What the pool told about itself when a connection could not be had, for the refusal's message. */
export interface PoolState {
  size: number
  acquireMs: number
  /** Connections open when the wait ended: all of them means every one was in use. */
  open: number
}

/**
 * A PostgreSQL failure as the gateway's own error: GW_ERR_STORE_UNAVAILABLE saying what went wrong in the
 * gateway's words, the driver's error (which may name hosts, roles or statements) kept in `cause`. The gateway's
 * own errors (a limit refused inside a transaction) pass as they are.
 */
export function unavailable (err: unknown, pool?: PoolState): GatewayError {
  if (err instanceof GatewayError) return err
  return new GatewayError('GW_ERR_STORE_UNAVAILABLE', [describe(err, pool)], { cause: err })
}

function describe (err: unknown, pool: PoolState | undefined): string {
  if (err instanceof pg.DatabaseError) {
    const code = err.code ?? ''
    if (UNREACHABLE.test(code)) return 'PostgreSQL is unreachable'
    if (code === '53300') return 'PostgreSQL accepts no more connections (max_connections reached)'
    if (code.startsWith('53')) return `PostgreSQL is out of resources (SQLSTATE ${code})`
    if (code === '25006') return 'PostgreSQL refuses writes (the server is read-only: a standby?)'
    return `PostgreSQL rejected a statement (SQLSTATE ${code})`
  }
  const message = err instanceof Error ? err.message : String(err)
  if (message === ACQUIRE_TIMEOUT && pool !== undefined && pool.open >= pool.size) {
    return `the pool of ${pool.size} PostgreSQL connections is exhausted: none came free within ${pool.acquireMs / 1000} s (store.poolSize, store.acquireTimeout)`
  }
  if (message.includes('after calling end on the pool')) return 'the store was closed'
  return 'PostgreSQL is unreachable'
}

/** Whether a transaction failed only because it lost a race the server resolves by aborting one side: run it again. */
export function isRetryable (err: unknown): boolean {
  return err instanceof pg.DatabaseError && (err.code === '40P01' || err.code === '40001')
}

/** Whether the connection a statement ran on was ended under it (by the server, or the network), not the statement refused. */
export function isLost (err: unknown): boolean {
  if (err instanceof pg.DatabaseError) return UNREACHABLE.test(err.code ?? '')
  const message = err instanceof Error ? err.message : ''
  return /Connection terminated|ECONNRESET|EPIPE|Client has encountered a connection error/.test(message)
}

/**
 * Logs an outage of PostgreSQL once when it begins (a statement or an idle connection met a lost connection, or
 * none could be opened) and once when it ends (the next statement that succeeds), not once per failed statement.
 */
export class OutageLog {
  readonly #log: Logger | undefined
  #lostAt: number | undefined

  constructor (log?: Logger) {
    this.#log = log
  }

  /** Told of every failure: one that is not a lost server (a statement refused, a limit) is no outage. */
  failed (err: unknown): void {
    if (this.#lostAt !== undefined || !(isLost(err) || isUnreachable(err))) return
    this.#lostAt = Date.now()
    this.#log?.warn({ err: describe(err, undefined) }, 'PostgreSQL connection lost; requests that need the store fail until it is back')
  }

  succeeded (): void {
    if (this.#lostAt === undefined) return
    this.#log?.info({ downMs: Date.now() - this.#lostAt }, 'PostgreSQL connection restored')
    this.#lostAt = undefined
  }
}

/** A connection that could not be opened at all (refused, unresolvable, timed out). */
function isUnreachable (err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code
  return typeof code === 'string' && /^(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH)$/.test(code)
}
