import type { StoreConfig } from '../config/schema.ts'
import type { Logger } from '../observability/logger.ts'
import type { GatewayStore } from './types.ts'
import { MemoryStore } from './memory/memory-store.ts'

/** The store `config` names; `log` hears when a shared store's connection is lost and restored. */
export async function createStore (config: StoreConfig, log?: Logger): Promise<GatewayStore> {
  switch (config.kind) {
    case 'memory':
      return new MemoryStore()
    case 'redis': {
      const { RedisStore } = await import('./redis/redis-store.ts')
      const store = new RedisStore({ ...config, ...(log && { log }) })
      await store.ready()
      return store
    }
    case 'sqlite': {
      const { SqliteStore } = await import('./sqlite/sqlite-store.ts')
      return new SqliteStore(config.path)
    }
  }
}
