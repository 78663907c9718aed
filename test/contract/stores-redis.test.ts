// The store contract suites on Redis: a file of its own, so that the backends run side by side in the suite's
// workers (a file runs in one worker, its tests one after another).
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { RedisStore } from '../../src/store/redis/redis-store.ts'
import type { TaskRecord } from '../../src/store/types.ts'
import { isolatedRedisStore, purge, REDIS_URL, sharedRedisStores } from '../helpers/redis.ts'
import { sessionStoreContract } from './session-store.contract.ts'
import { taskStoreContract } from './task-store.contract.ts'
import { taskInputStoreContract } from './task-input-store.contract.ts'
import { ownershipContract } from './ownership.contract.ts'
import { homeStoreContract } from './home-store.contract.ts'
import { taskLimitContract } from './task-limit.contract.ts'
import { taskQueryContract } from './task-query.contract.ts'
import { taskTimelineContract } from './task-timeline.contract.ts'
import { storedBytesContract } from './stored-bytes.contract.ts'
import { rateLimitStoreContract } from './rate-limit-store.contract.ts'

sessionStoreContract('redis', isolatedRedisStore)
taskStoreContract('redis', isolatedRedisStore)
taskInputStoreContract('redis', isolatedRedisStore)
ownershipContract('redis', isolatedRedisStore)
homeStoreContract('redis', isolatedRedisStore)
taskLimitContract('redis, two processes', async () => await sharedRedisStores(2))
taskQueryContract('redis', isolatedRedisStore)
taskTimelineContract('redis', isolatedRedisStore)
storedBytesContract('redis, two processes', async () => await sharedRedisStores(2))
rateLimitStoreContract({ redis: isolatedRedisStore })

function task (id: string): TaskRecord {
  return {
    id,
    principal: 'p',
    sessionId: null,
    era: '2026-07-28',
    status: 'working',
    statusMessage: null,
    createdAt: 1,
    lastUpdatedAt: 1,
    ttlMs: null,
    pollIntervalMs: 1_000,
    owner: 'gateway-a',
    upstream: 'demo',
    tool: 'echo',
    request: { arguments: { text: 'x' } },
    progressToken: 7,
    clientCapabilities: {},
    outcome: null,
    traceContext: null,
    resume: null,
  }
}

describe('redis store', () => {
  it('gives back the bytes of a task whose hash Redis expired before any sweep (a store nobody swept for a day)', async () => {
    const prefix = `mcpgw-test:${randomUUID()}:`
    const store = new RedisStore({ url: REDIS_URL, prefix })
    const redis = new Redis(REDIS_URL)
    try {
      await store.ready()
      const expiring = { ...task(randomUUID()), ttlMs: 1000, request: { arguments: { blob: 'b'.repeat(5000) } } }
      await store.tasks.create(expiring, { account: 'acct', maxActive: 1 })
      expect(await store.tasks.storedBytes('acct')).toBeGreaterThan(5000)
      // What the key's backstop expiry does when no gateway sweeps in time.
      await redis.del(`${prefix}task:${expiring.id}`)
      expect(await store.tasks.sweep(1 + 1000)).toBe(1)
      expect(await store.tasks.storedBytes('acct')).toBe(0)
      await store.tasks.create({ ...task(randomUUID()), createdAt: 2000 }, { account: 'acct', maxActive: 1 })
    } finally {
      await store.close()
      await redis.quit()
      await purge(prefix)
    }
  })

  it('bus.subscribed() resolves once another process\'s publish reaches the new subscription', async () => {
    const [publisher, subscriber] = await sharedRedisStores(2)
    try {
      const heard = new Promise<unknown>((resolve) => subscriber!.bus.subscribe('watch', resolve))
      await subscriber!.bus.subscribed()
      expect(await publisher!.bus.publish('watch', { n: 1 })).toBe(1)
      expect(await heard).toEqual({ n: 1 })
    } finally {
      await publisher!.close()
      await subscriber!.close()
    }
  })

  it('reports an unreachable Redis with its own code and keeps the backend error as the cause', async () => {
    const store = await isolatedRedisStore()
    await store.close()
    for (const attempt of [store.tasks.get('t1', 1), store.sessions.get('s1'), store.leases.lapsed(1)]) {
      const failure = await attempt.catch((err: unknown) => err)
      expect(failure).toMatchObject({ code: 'GW_ERR_STORE_UNAVAILABLE', message: 'the store is unavailable: Redis is unreachable' })
      expect((failure as Error).cause).toBeInstanceOf(Error)
    }
    expect(await store.bus.publish('nobody', {})).toBe(0)
  })
})
