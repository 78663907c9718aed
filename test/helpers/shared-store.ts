import { randomUUID } from 'node:crypto'
import { PostgresStore } from '../../src/store/postgres/postgres-store.ts'
import { RedisStore } from '../../src/store/redis/redis-store.ts'
import type { GatewayStore } from '../../src/store/types.ts'
import { dropSchema, freshSchema, POSTGRES_URL, storeOptions } from './postgres.ts'
import { purge, REDIS_URL } from './redis.ts'

/** The stores several gateway processes can share: the multi-process tests run on each. */
export type SharedKind = 'redis' | 'postgres'

export const SHARED_KINDS: readonly SharedKind[] = ['redis', 'postgres']

/** One test's own place in a shared store: a Redis key prefix, or a PostgreSQL schema. */
export interface SharedStore {
  kind: SharedKind
  /** The `store` section of the config of every process of the test. */
  config: Record<string, string | number>
  /** The same section as YAML (one flow mapping), for a config file. */
  yaml: string
  /** A store of the test's own on the same data, for reading what the processes stored (closed by the caller). */
  open (): Promise<GatewayStore>
  /** Removes everything the processes stored. */
  drop (): Promise<void>
}

/** A fresh place in a shared store of `kind`: a key prefix starting with `name`, or a schema of its own. */
export function sharedStore (kind: SharedKind, name = 'mcpgw-test'): SharedStore {
  if (kind === 'postgres') {
    const schema = freshSchema()
    const open = (): PostgresStore => new PostgresStore(storeOptions(schema))
    // A small pool: the test files running at once share the server's 100 connections (each process holds
    // poolSize of them, and one for its LISTEN connection).
    return place({ kind, url: POSTGRES_URL, schema, poolSize: 4 }, open, async () => { await dropSchema(schema) })
  }
  const prefix = `${name}:${randomUUID()}:`
  return place({ kind, url: REDIS_URL, prefix }, () => new RedisStore({ url: REDIS_URL, prefix }), async () => { await purge(prefix) })
}

type Opener = () => GatewayStore & { ready (): Promise<void> }

function place (config: { kind: SharedKind } & Record<string, string | number>, store: Opener, drop: () => Promise<void>): SharedStore {
  return {
    kind: config.kind,
    config,
    yaml: `{ ${Object.entries(config).map(([key, value]) => `${key}: ${JSON.stringify(value)}`).join(', ')} }`,
    open: async () => {
      const opened = store()
      await opened.ready()
      return opened
    },
    drop,
  }
}

/** Runs `read` on a store of the test's own on `shared`, then closes it. */
export async function readStore<T> (shared: SharedStore, read: (store: GatewayStore) => Promise<T>): Promise<T> {
  const store = await shared.open()
  try {
    return await read(store)
  } finally {
    await store.close()
  }
}
