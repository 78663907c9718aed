import { readFileSync } from 'node:fs'
import { Redis } from 'ioredis'
import { REDIS_URL } from './redis.ts'

// What a backend itself holds, as text, for tests that search it for what must never be stored in clear.

/** The bytes of a SQLite database file and of its write-ahead log, as text. */
export function sqliteBytes (file: string): string {
  const parts = [file, `${file}-wal`].map((path) => {
    try {
      return readFileSync(path).toString('latin1')
    } catch {
      return ''
    }
  })
  return parts.join('\n')
}

/** Every value Redis holds under `prefix` (hash fields and values, set members, strings), as text. */
export async function redisValues (prefix: string): Promise<string> {
  const redis = new Redis(REDIS_URL)
  try {
    const keys = await redis.keys(`${prefix}*`)
    const values: string[] = []
    for (const key of keys) {
      const type = await redis.type(key)
      if (type === 'hash') values.push(...Object.entries(await redis.hgetall(key)).flat())
      else if (type === 'zset') values.push(...await redis.zrange(key, '0', '-1'))
      else if (type === 'string') values.push(await redis.get(key) ?? '')
      else if (type === 'list') values.push(...await redis.lrange(key, '0', '-1'))
      else if (type === 'set') values.push(...await redis.smembers(key))
    }
    return [...keys, ...values].join('\n')
  } finally {
    await redis.quit()
  }
}
