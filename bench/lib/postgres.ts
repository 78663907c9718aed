// The PostgreSQL that the bench's postgres-store gateways use (settings.postgresUrl). Each gateway, or group of
// gateways sharing a store, gets a fresh schema, dropped once they are closed (or by the run's clean-up, which
// runs newest first: after the gateways started later have closed).
import { randomUUID } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import pg from 'pg'
import { procCpuMs, track } from './processes.ts'

export type PostgresStoreConfig = { kind: 'postgres', url: string, schema: string }

export interface BenchPostgresStore {
  /** The gateway's `store` section. */
  config: PostgresStoreConfig
  /** Drops the schema (once; call it after the gateways using it have closed). */
  drop (): Promise<void>
}

let reachable: Promise<boolean> | undefined

async function query (url: string, sql: string): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 })
  client.on('error', () => {})
  await client.connect()
  try {
    return await client.query(sql)
  } finally {
    await client.end()
  }
}

/** Whether PostgreSQL answers at `url`; asked once per run, so a machine without one skips the postgres rows. */
export function postgresReachable (url: string): Promise<boolean> {
  reachable ??= query(url, 'SELECT 1').then(() => true, () => false)
  return reachable
}

/** A store section on a fresh schema, with its clean-up registered before any gateway uses it. */
export function freshPostgresStore (url: string): BenchPostgresStore {
  const config: PostgresStoreConfig = { kind: 'postgres', url, schema: `mcpgw_bench_${randomUUID().replaceAll('-', '')}` }
  return { config, drop: track(async () => { await query(url, `DROP SCHEMA IF EXISTS "${config.schema}" CASCADE`) }) }
}

/**
 * CPU time (user + system, ms) the PostgreSQL server's processes on this machine have used so far (the
 * postmaster and its backends, from /proc; a backend that ended takes its time with it, so a window's delta
 * holds while the gateways keep their pooled connections); undefined when none is found (another machine).
 */
export function postgresCpuMs (): number | undefined {
  let total = 0
  let found = false
  let pids: string[]
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name))
  } catch {
    return undefined
  }
  for (const pid of pids) {
    let comm: string
    try {
      comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
    } catch {
      continue
    }
    if (comm !== 'postgres' && !comm.startsWith('postgres:')) continue
    const cpu = procCpuMs(Number(pid))
    if (cpu === undefined) continue
    total += cpu
    found = true
  }
  return found ? total : undefined
}
