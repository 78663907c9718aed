import { randomUUID } from 'node:crypto'
import { RedisStore } from '../../src/store/redis/redis-store.ts'
import type { GatewayStore } from '../../src/store/types.ts'
import { purge, REDIS_URL } from './redis.ts'

/** The stores several gateway processes can share: the multi-process tests run on each. */
export type SharedKind = 'redis'

export const SHARED_KINDS: readonly SharedKind[] = ['redis']

/** One test's own place in a shared store: a Redis key prefix, or a PostgreSQL schema. */
export interface SharedStore {
  kind: SharedKind
  /** The `store` section of the config of every process of the test. */
  config: Record<string, string>
  /** The same section as YAML (one flow mapping), for a config file. */
  yaml: string
  /** A store of the test's own on the same data, for reading what the processes stored (closed by the caller). */
  open (): Promise<GatewayStore>
  /** Removes everything the processes stored. */
  drop (): Promise<void>
}

/** A fresh place in a shared store of `kind`, under a name starting with `name`. */
export function sharedStore (kind: SharedKind, name = 'mcpgw-test'): SharedStore {
  const prefix = `${name}:${randomUUID()}:`
  const config = { kind, url: REDIS_URL, prefix }
  return {
    kind,
    config,
    yaml: `{ ${Object.entries(config).map(([key, value]) => `${key}: ${JSON.stringify(value)}`).join(', ')} }`,
    open: async () => {
      const store = new RedisStore({ url: REDIS_URL, prefix })
      await store.ready()
      return store
    },
    drop: async () => { await purge(prefix) },
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
