import { Redis } from 'ioredis'
import type { TestProject } from 'vitest/node'

declare module 'vitest' {
  export interface ProvidedContext {
    /** Why the tests that need Redis cannot run (null when Redis answered PING). */
    redisProblem: string | null
  }
}

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/**
 * Asks Redis for a PING once, before any test file runs. A file that needs Redis (it imports
 * test/helpers/redis.ts) then fails at once with what to start, instead of every test timing out.
 */
export default async function setup (project: TestProject): Promise<void> {
  project.provide('redisProblem', await redisProblem())
}

async function redisProblem (): Promise<string | null> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0, retryStrategy: () => null })
  redis.on('error', () => {})
  try {
    await redis.connect()
    await redis.ping()
    return null
  } catch (err) {
    return `this test file needs a Redis server at ${REDIS_URL} (set REDIS_URL for another one), ` +
      `and none answered (${(err as Error).message.replace(/\.$/, '')}). Start one, for example \`redis-server\` or ` +
      '`docker run --rm -p 6379:6379 redis:7`; see docs/development.md.'
  } finally {
    redis.disconnect()
  }
}
