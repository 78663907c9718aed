import type { Redis } from 'ioredis'
import type { HomeStore } from '../types.ts'
import { run, script } from './redis-scripts.ts'

/**
 * Compare-and-set of a client's home.
 * KEYS[1] home key. ARGV[1] the home it may replace ('' for none), ARGV[2] the new home, ARGV[3] ttl (ms).
 * Returns the home after the call.
 */
const CLAIM_HOME = script(`
local current = redis.call('GET', KEYS[1])
if (not current) or current == ARGV[1] or current == ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return ARGV[2]
end
return current
`)

/**
 * Renews the homes of several clients held by one process.
 * KEYS home keys. ARGV[1] the home, ARGV[2] ttl (ms). Returns the 1-based indexes of the keys it no longer holds.
 */
const RENEW_HOMES = script(`
local lost = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
  else
    lost[#lost + 1] = i
  end
end
return lost
`)

/** KEYS[1] home key, ARGV[1] home: deletes the key when it still names that home. */
const RELEASE_HOME = script(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`)

/** Client homes: home:<client key>, a string naming the process, expiring unless renewed. */
export class RedisHomeStore implements HomeStore {
  readonly #redis: Redis
  readonly #p: string

  constructor (redis: Redis, prefix: string) {
    this.#redis = redis
    this.#p = prefix
  }

  async claim (client: string, from: string | null, to: string, ttlMs: number): Promise<string> {
    return String(await run(this.#redis, CLAIM_HOME, [this.#key(client)], [from ?? '', to, Math.max(1, Math.round(ttlMs))]))
  }

  async renew (home: string, clients: readonly string[], ttlMs: number): Promise<string[]> {
    if (clients.length === 0) return []
    const lost = await run(this.#redis, RENEW_HOMES, clients.map((c) => this.#key(c)), [home, Math.max(1, Math.round(ttlMs))]) as number[]
    return lost.map((index) => clients[index - 1]!)
  }

  async release (client: string, home: string): Promise<void> {
    await run(this.#redis, RELEASE_HOME, [this.#key(client)], [home])
  }

  #key (client: string): string {
    return `${this.#p}home:${client}`
  }
}
