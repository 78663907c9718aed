import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { inject } from 'vitest'
import { RedisStore } from '../../src/store/redis/redis-store.ts'

/** The machine's Redis (also on CI); REDIS_URL overrides it. */
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

// Every file that needs Redis imports this module: without a Redis (test/global-setup.ts asked), such a file
// fails here, saying what to start, rather than in timeouts test by test.
const redisProblem = inject('redisProblem')
if (redisProblem) throw new Error(redisProblem)

/**
 * The `server.stateSecret` of the gateways of a test that share a Redis store (required there: the processes
 * sign their messages to each other with a key derived from it).
 */
export const STATE_SECRET = 'a test secret every gateway process of the test shares'

/** Deletes every key under `prefix`. */
export async function purge (prefix: string): Promise<number> {
  const redis = new Redis(REDIS_URL)
  let deleted = 0
  let cursor = '0'
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500)
    cursor = next
    if (keys.length > 0) deleted += await redis.del(...keys)
  } while (cursor !== '0')
  await redis.quit()
  return deleted
}

/** A Redis store under a fresh prefix whose keys are deleted when it is closed. */
export async function isolatedRedisStore (): Promise<RedisStore> {
  const prefix = `mcpgw-test:${randomUUID()}:`
  const store = new RedisStore({ url: REDIS_URL, prefix })
  await store.ready()
  const close = store.close.bind(store)
  store.close = async () => {
    await close()
    await purge(prefix)
  }
  return store
}

/** `count` Redis stores on one fresh prefix (the stores of as many gateway processes); every key is deleted when the last is closed. */
export async function sharedRedisStores (count: number): Promise<RedisStore[]> {
  const prefix = `mcpgw-test:${randomUUID()}:`
  let open = count
  const stores: RedisStore[] = []
  for (let i = 0; i < count; i++) {
    const store = new RedisStore({ url: REDIS_URL, prefix })
    await store.ready()
    const close = store.close.bind(store)
    store.close = async () => {
      await close()
      if (--open === 0) await purge(prefix)
    }
    stores.push(store)
  }
  return stores
}
