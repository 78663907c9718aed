// The grant store contract on each backend: memory, a real SQLite file (reopened as the next start would),
// Redis and PostgreSQL (a second store on the same prefix or schema, as another process). The raw readers look
// at what the backend itself holds: the file's bytes, every value under the prefix, every row of the table.
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll } from 'vitest'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import { PostgresStore } from '../../src/store/postgres/postgres-store.ts'
import { RedisStore } from '../../src/store/redis/redis-store.ts'
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import type { GatewayStore } from '../../src/store/types.ts'
import { dropSchema, freshSchema, sql, storeOptions } from '../helpers/postgres.ts'
import { purge, REDIS_URL } from '../helpers/redis.ts'
import { redisValues, sqliteBytes } from '../helpers/raw-store.ts'
import { grantStoreContract, type GrantBackend } from './grant-store.contract.ts'

const dir = mkdtempSync(join(tmpdir(), 'gw-grants-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

grantStoreContract('memory', async () => {
  const store = new MemoryStore()
  return { first: store, next: async () => store, close: async () => { await store.close() } }
})

grantStoreContract('sqlite', async () => {
  const file = join(dir, `${randomUUID()}.db`)
  const first = new SqliteStore(file)
  let current: GatewayStore = first
  const backend: GrantBackend = {
    first,
    next: async () => {
      await first.close()
      current = new SqliteStore(file)
      return current
    },
    raw: async () => sqliteBytes(file),
    close: async () => { await current.close() },
  }
  return backend
})

grantStoreContract('redis, two processes', async () => {
  const prefix = `mcpgw-test:${randomUUID()}:`
  const stores = [new RedisStore({ url: REDIS_URL, prefix }), new RedisStore({ url: REDIS_URL, prefix })]
  await Promise.all(stores.map(async (store) => { await store.ready() }))
  return {
    first: stores[0]!,
    next: async () => stores[1]!,
    raw: async () => await redisValues(prefix),
    close: async () => {
      await Promise.all(stores.map(async (store) => { await store.close() }))
      await purge(prefix)
    },
  }
})

grantStoreContract('postgres, two processes', async () => {
  const schema = freshSchema()
  const stores = [new PostgresStore(storeOptions(schema)), new PostgresStore(storeOptions(schema))]
  for (const store of stores) await store.ready()
  return {
    first: stores[0]!,
    next: async () => stores[1]!,
    raw: async () => (await sql(`SELECT row_to_json(g)::text AS row FROM "${schema}".grants AS g`)).rows.map((r: { row: string }) => r.row).join('\n'),
    close: async () => {
      await Promise.all(stores.map(async (store) => { await store.close() }))
      await dropSchema(schema)
    },
  }
})
