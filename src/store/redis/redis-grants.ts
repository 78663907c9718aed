import type { Redis } from 'ioredis'
import type { GrantRecord, GrantStore } from '../types.ts'
import { run, script } from './redis-scripts.ts'

/** Records a sweep deletes per script run (each run is one atomic step that holds Redis that long). */
const SWEEP_BATCH = 500

/**
 * Replaces a grant. KEYS[1] the grant hash, KEYS[2] the expiry index. ARGV[1] sealed, ARGV[2] expiresAt (epoch
 * ms), ARGV[3] the key's own expiry (ms from now), a backstop for a store nobody sweeps.
 */
const PUT = script(`
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'sealed', ARGV[1], 'expiresAt', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], KEYS[1])
return 1
`)

/** KEYS[1] the grant hash, KEYS[2] the expiry index; ARGV[1] the sealed text it must still hold ('' for any). Returns 1 when deleted. */
const DELETE = script(`
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], 'sealed') ~= ARGV[1] then return 0 end
redis.call('ZREM', KEYS[2], KEYS[1])
return redis.call('DEL', KEYS[1])
`)

/** KEYS[1] the expiry index; ARGV[1] now, ARGV[2] batch size. Deletes expired grants; returns { seen, deleted }. */
const SWEEP = script(`
local keys = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local deleted = 0
for _, key in ipairs(keys) do
  local expires = redis.call('HGET', key, 'expiresAt')
  if expires and tonumber(expires) <= tonumber(ARGV[1]) then deleted = deleted + redis.call('DEL', key) end
  redis.call('ZREM', KEYS[1], key)
end
return { #keys, deleted }
`)

/**
 * Sealed grants: grant:<upstream length>:<upstream>:<principal>, a hash of the sealed text and its expiry, and
 * grant-expiries, a sorted set of those keys by expiry that the sweep reads. Each key also expires by itself.
 */
export class RedisGrantStore implements GrantStore {
  readonly #redis: Redis
  readonly #p: string
  readonly #index: string

  constructor (redis: Redis, prefix: string) {
    this.#redis = redis
    this.#p = prefix
    this.#index = `${prefix}grant-expiries`
  }

  async put (record: GrantRecord): Promise<void> {
    const backstopMs = Math.max(1, Math.round(record.expiresAt - Date.now()))
    await run(this.#redis, PUT, [this.#key(record.principal, record.upstream), this.#index], [record.sealed, record.expiresAt, backstopMs])
  }

  async get (principal: string, upstream: string, now: number): Promise<GrantRecord | null> {
    const [sealed, expires] = await this.#redis.hmget(this.#key(principal, upstream), 'sealed', 'expiresAt')
    if (sealed == null || expires == null || Number(expires) <= now) return null
    return { principal, upstream, sealed, expiresAt: Number(expires) }
  }

  async delete (principal: string, upstream: string, sealed?: string): Promise<boolean> {
    return Number(await run(this.#redis, DELETE, [this.#key(principal, upstream), this.#index], [sealed ?? ''])) > 0
  }

  async sweep (now: number): Promise<number> {
    let deleted = 0
    for (;;) {
      const [seen, gone] = await run(this.#redis, SWEEP, [this.#index], [now, SWEEP_BATCH]) as [number, number]
      deleted += gone
      if (seen < SWEEP_BATCH) return deleted
    }
  }

  #key (principal: string, upstream: string): string {
    return `${this.#p}grant:${upstream.length}:${upstream}:${principal}`
  }
}
