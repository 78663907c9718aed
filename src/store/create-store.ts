import type { StoreConfig } from '../config/schema.ts'
import type { Logger } from '../observability/logger.ts'
import type { GatewayStore } from './types.ts'
import { MemoryStore } from './memory/memory-store.ts'
import { WriteRefusals } from './write-refusals.ts'

/** The store `config` names; `log` hears when a shared store's connection is lost and restored, and when writes are refused. */
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
    case 'postgres': {
      const { PostgresStore } = await import('./postgres/postgres-store.ts')
      const store = new PostgresStore({ ...config, ...(log && { log }) })
      try {
        await store.ready()
      } catch (err) {
        await store.close()
        throw err
      }
      return store
    }
    case 'sqlite': {
      const { SqliteStore } = await import('./sqlite/sqlite-store.ts')
      const refusals = new WriteRefusals((refusal) => {
        if (refusal !== undefined) log?.error({ reason: refusal.reason }, 'The store refuses writes; tasks whose outcome cannot be stored stay unfinished until it accepts them again')
        else log?.info('The store accepts writes again')
      })
      const onFault = (detail: string): void => { log?.error({ detail }, 'The SQLite store takes no new work') }
      const lock = { staleMs: config.lockStaleAfter, heartbeatMs: config.lockStaleAfter / 6 }
      return new SqliteStore(config.path, { refusals, onFault, lock, busyWaitMs: config.busyWait })
    }
  }
}
