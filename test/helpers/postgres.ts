import { randomUUID } from 'node:crypto'
import pg from 'pg'
import { inject } from 'vitest'
import { PostgresStore, type PostgresStoreOptions } from '../../src/store/postgres/postgres-store.ts'

/** The machine's PostgreSQL (also on CI: trust auth, user postgres); POSTGRES_URL overrides it. */
export const POSTGRES_URL = process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

// Every file that needs PostgreSQL imports this module: without a server (test/global-setup.ts asked), such a file
// fails here, saying what to start, rather than in timeouts test by test.
const postgresProblem = inject('postgresProblem')
if (postgresProblem) throw new Error(postgresProblem)

/** A schema name of its own for one test (or one group of processes of a test). */
export function freshSchema (): string {
  return `gw_test_${randomUUID().replaceAll('-', '')}`
}

/** Runs one statement on a connection of its own (outside any store). */
export async function sql (text: string, values: unknown[] = [], url = POSTGRES_URL): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await client.query(text, values)
  } finally {
    await client.end()
  }
}

/** Drops a schema and everything in it. */
export async function dropSchema (schema: string, url = POSTGRES_URL): Promise<void> {
  await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`, [], url)
}

/** The options of a store on `schema`, with small defaults a test may override. */
export function storeOptions (schema: string, options: Partial<PostgresStoreOptions> = {}): PostgresStoreOptions {
  return { url: POSTGRES_URL, schema, poolSize: 5, acquireTimeout: 5000, ...options }
}

/** A PostgreSQL store on a fresh schema, dropped when the store is closed. */
export async function isolatedPostgresStore (): Promise<PostgresStore> {
  return (await sharedPostgresStores(1))[0]!
}

/**
 * `count` PostgreSQL stores on one fresh schema (the stores of as many gateway processes); the schema is dropped
 * when the last is closed.
 */
export async function sharedPostgresStores (count: number, options: Partial<PostgresStoreOptions> = {}): Promise<PostgresStore[]> {
  const schema = freshSchema()
  let open = count
  const stores: PostgresStore[] = []
  for (let i = 0; i < count; i++) {
    const store = new PostgresStore(storeOptions(schema, options))
    await store.ready()
    const close = store.close.bind(store)
    let closed = false
    store.close = async () => {
      await close()
      if (closed) return
      closed = true
      if (--open === 0) await dropSchema(schema)
    }
    stores.push(store)
  }
  return stores
}
