import type { Redis } from 'ioredis'
import type { Logger } from '../../observability/logger.ts'
import { rewrittenEra } from '../stored-revision.ts'
import { run, script } from './redis-scripts.ts'

/** Task hashes read per round trip of the pass. */
const BATCH = 500

/**
 * Replaces a task's `body` and `res` with their rewritten texts, each only if it still holds the text the pass
 * read (a task swept or moved since is left as it is: HSET on a key gone would create it).
 * KEYS: the task hash. ARGV: body read, body rewritten, res read, res rewritten ('' where nothing to rewrite).
 * Returns how many fields it rewrote.
 */
const REWRITE = script(`
local n = 0
if ARGV[2] ~= '' and redis.call('HGET', KEYS[1], 'body') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'body', ARGV[2])
  n = n + 1
end
if ARGV[4] ~= '' and redis.call('HGET', KEYS[1], 'res') == ARGV[3] then
  redis.call('HSET', KEYS[1], 'res', ARGV[4])
  n = n + 1
end
return n
`)

/** A key prefix as a SCAN pattern that matches it literally. */
function literal (prefix: string): string {
  return prefix.replace(/[*?[\]\\]/g, '\\$&')
}

/**
 * Redis has no schema to migrate: the store's first start of this version makes one pass over the task hashes
 * under `prefix` and rewrites each task's era, and its resume address's, from the previous names to revisions
 * (src/store/stored-revision.ts), then records that the pass is done (`<prefix>revisions`), so later starts skip
 * it. Each rewrite is a compare-and-set of one hash, so processes starting at once may both make the pass and
 * the second finds nothing to do; a pass cut short (the process stopped) is made again by the next start.
 * Readers take the previous names too, for what a process of the previous version writes meanwhile.
 */
export async function migrateRevisions (redis: Redis, prefix: string, log?: Logger): Promise<void> {
  const done = `${prefix}revisions`
  if (await redis.get(done) !== null) return
  let cursor = '0'
  let rewritten = 0
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${literal(prefix)}task:*`, 'COUNT', BATCH)
    cursor = next
    const read = redis.pipeline()
    for (const key of keys) read.hmget(key, 'body', 'res')
    const fields = (await read.exec()) ?? []
    for (const [i, key] of keys.entries()) {
      const [err, value] = fields[i] ?? []
      if (err !== null && err !== undefined) throw err
      const [body, res] = (value ?? []) as Array<string | null>
      const newBody = body === null || body === undefined ? undefined : rewrittenEra(body)
      const newRes = res === null || res === undefined || res === '' ? undefined : rewrittenEra(res)
      if (newBody === undefined && newRes === undefined) continue
      rewritten += Number(await run(redis, REWRITE, [key], [body ?? '', newBody ?? '', res ?? '', newRes ?? '']))
    }
  } while (cursor !== '0')
  await redis.set(done, '1')
  if (rewritten > 0) log?.info({ fields: rewritten }, 'Redis store: the eras of stored tasks are named by their revisions now')
}
