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

/** A PostgreSQL store on a schema of its own, emptied when the store is closed (see sharedPostgresStores). */
export async function isolatedPostgresStore (): Promise<PostgresStore> {
  return (await sharedPostgresStores(1))[0]!
}

/**
 * Schemas whose stores were all closed, emptied: migrated already, each is as a fresh one to the next store opened
 * on it. Creating a schema and its tables costs PostgreSQL about a hundred times more than emptying them, and the
 * contract suites open a store for each test. Per worker, as modules are: dropEmptiedSchemas() after a file.
 */
const emptied: string[] = []

/**
 * `count` PostgreSQL stores on one schema of their own (the stores of as many gateway processes), opened side by
 * side; when the last is closed, the schema is emptied (every row, every sequence from 1 again) for a later test.
 */
export async function sharedPostgresStores (count: number, options: Partial<PostgresStoreOptions> = {}): Promise<PostgresStore[]> {
  const schema = emptied.pop() ?? freshSchema()
  let open = count
  const stores = Array.from({ length: count }, () => new PostgresStore(storeOptions(schema, options)))
  await Promise.all(stores.map(async (store) => { await store.ready() }))
  for (const store of stores) {
    const close = store.close.bind(store)
    let closed = false
    store.close = async () => {
      await close()
      if (closed) return
      closed = true
      if (--open > 0) return
      await emptySchema(schema)
      emptied.push(schema)
    }
  }
  return stores
}

/** Deletes every row of the store's tables in `schema` and restarts its sequences, leaving its migrations recorded. */
async function emptySchema (schema: string): Promise<void> {
  const s = pg.escapeIdentifier(schema)
  const client = new pg.Client({ connectionString: POSTGRES_URL })
  await client.connect()
  try {
    const tables = await client.query<{ name: string }>(
      "SELECT tablename AS name FROM pg_tables WHERE schemaname = $1 AND tablename <> 'schema_migrations'", [schema])
    const sequences = await client.query<{ name: string }>('SELECT sequencename AS name FROM pg_sequences WHERE schemaname = $1', [schema])
    // DELETE rather than TRUNCATE: on tables this small it skips the new files (and their fsyncs) a TRUNCATE makes.
    await client.query([
      ...tables.rows.map(({ name }) => `DELETE FROM ${s}.${pg.escapeIdentifier(name)}`),
      ...sequences.rows.map(({ name }) => `ALTER SEQUENCE ${s}.${pg.escapeIdentifier(name)} RESTART`),
    ].join('; '))
  } finally {
    await client.end()
  }
}

/** Drops the schemas sharedPostgresStores kept for reuse (after the last test of a file that opened stores with it). */
export async function dropEmptiedSchemas (): Promise<void> {
  for (const schema of emptied.splice(0)) await dropSchema(schema)
}
