// The Redis that the bench's redis-store gateways use (settings.redisUrl). Each gateway, or group of
// gateways sharing a store, gets a fresh key prefix whose keys are deleted once they are closed (or by
// the run's clean-up, which runs newest first: after the gateways started later have closed).
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { track } from './processes.ts'

export type RedisStoreConfig = { kind: 'redis', url: string, prefix: string }

export interface BenchRedisStore {
  /** The gateway's `store` section. */
  config: RedisStoreConfig
  /** Deletes every key under the prefix (once; call it after the gateways using it have closed). */
  purge (): Promise<void>
}

let reachable: Promise<boolean> | undefined

/** `url` without its password, for the report. */
export function printableUrl (url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password !== '') parsed.password = '***'
    return parsed.href
  } catch {
    return '(not a URL)'
  }
}

function connect (url: string): Redis {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 2000 })
  redis.on('error', () => {})
  return redis
}

/** Whether Redis answers at `url`; asked once per run, so a machine without Redis skips the redis rows. */
export function redisReachable (url: string): Promise<boolean> {
  reachable ??= (async () => {
    const redis = connect(url)
    try {
      await redis.connect()
      return await redis.ping() === 'PONG'
    } catch {
      return false
    } finally {
      redis.disconnect()
    }
  })()
  return reachable
}

async function purge (url: string, prefix: string): Promise<void> {
  const redis = connect(url)
  try {
    await redis.connect()
    let cursor = '0'
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
      cursor = next
      if (keys.length > 0) await redis.unlink(...keys)
    } while (cursor !== '0')
  } finally {
    redis.disconnect()
  }
}

/** The `server.stateSecret` of the bench's gateways on Redis (required with a shared store). */
export const BENCH_STATE_SECRET = 'the bench gateways share this secret'

/** A store section on a fresh key prefix, with its clean-up registered before any gateway uses it. */
export function freshRedisStore (url: string): BenchRedisStore {
  const config: RedisStoreConfig = { kind: 'redis', url, prefix: `mcp-task-gateway-bench:${randomUUID()}:` }
  return { config, purge: track(() => purge(url, config.prefix)) }
}

/** CPU time (user + system, ms) the Redis server has used so far, from INFO; undefined when unavailable. */
export async function redisCpuMs (url: string): Promise<number | undefined> {
  const redis = connect(url)
  try {
    await redis.connect()
    const info = await redis.info('cpu')
    const field = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1])
    const total = (field('used_cpu_sys') + field('used_cpu_user')) * 1000
    return Number.isFinite(total) ? total : undefined
  } catch {
    return undefined
  } finally {
    redis.disconnect()
  }
}
