import type { Redis } from 'ioredis'
import type { RateLimitStore } from '../types.ts'
import { run, script } from './redis-scripts.ts'

/**
 * Takes one token from a bucket (the arithmetic of src/store/token-bucket.ts, in one atomic step).
 * KEYS[1] the bucket: a hash of `t` (tokens, fractional) and `at` (ms of the last update).
 * ARGV[1] rate (tokens per second), ARGV[2] burst (bucket size).
 * Returns 0 when a token was taken, else the ms until one token is there (at least 1); a refusal writes
 * nothing. The clock is the Redis server's TIME, not the callers': gateway processes whose clocks disagree
 * still share one bucket exactly. Each write sets the key to expire when the bucket would be full again, so
 * an idle bucket leaves no key behind (a missing bucket is a full one).
 */
const TAKE_TOKEN = script(`
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local state = redis.call('HMGET', KEYS[1], 't', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
elseif now > at then
  tokens = math.min(burst, tokens + (now - at) * rate / 1000)
  at = now
else
  tokens = math.min(burst, tokens)
end
if tokens < 1 then return math.max(1, math.ceil((1 - tokens) * 1000 / rate)) end
tokens = tokens - 1
redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens), 'at', string.format('%.17g', at))
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.max(1, math.ceil((burst - tokens) * 1000 / rate))))
return 0
`)

/** Buckets as `rate:<key>` hashes under the store's prefix, shared by every process on the prefix. */
export class RedisRateLimits implements RateLimitStore {
  readonly #redis: Redis
  readonly #p: string

  constructor (redis: Redis, prefix: string) {
    this.#redis = redis
    this.#p = prefix
  }

  async take (key: string, rate: number, burst: number): Promise<number> {
    return Number(await run(this.#redis, TAKE_TOKEN, [`${this.#p}rate:${key}`], [rate, burst]))
  }
}
