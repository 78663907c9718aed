import type { Redis } from 'ioredis'
import type { TaskCursor } from '../types.ts'
import { run, script } from './redis-scripts.ts'

/** Index entries one run of the list script looks at, at most, so that Redis is never blocked for long. */
export const LIST_VISIT_LIMIT = 2000

/**
 * One page of a principal's tasks, read inside Redis from the cursor's rank in the principal's sorted set: a page
 * costs O(log n + the entries it looks at), never an offset walk from the start of the set. An entry past its TTL
 * (its score in `expiry`) is passed over by that score alone, without reading its task, and taken out of the
 * principal's set (the sweep would take it out later; nothing else reads the set for tasks past their TTL), so each
 * one is looked at by one page only: tasks waiting for the sweep cost a page O(log n) each, once. A task whose hash
 * Redis's backstop expiry deleted is passed over and taken out alike.
 * KEYS[1] the principal's tasks (sorted set by createdAt, ties by id), KEYS[2] tasks by expiry.
 * ARGV[1] prefix, ARGV[2] the cursor's createdAt ('' for the first page), ARGV[3] the cursor's id, ARGV[4] the page
 * size, ARGV[5] now (ms), ARGV[6] the most entries to look at.
 * Returns { looked at, more, last createdAt, last id, task hashes (HGETALL)... }: `more` is 1 when the script
 * stopped at ARGV[6] before the page was full and the set goes on after the last entry looked at.
 */
const LIST_TASKS = script(`
-- Byte order, as Redis orders members of equal score (Lua's own < follows the locale).
local function upTo (a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a <= #b
end
local start = 0
if ARGV[2] ~= '' then
  local after = tonumber(ARGV[2])
  local rank = redis.call('ZRANK', KEYS[1], ARGV[3])
  local score = rank and tonumber(redis.call('ZSCORE', KEYS[1], ARGV[3]))
  if rank and score == after then
    start = rank + 1
  else
    -- The cursor's task is gone (swept): start at its createdAt and pass the ties up to its id.
    start = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. ARGV[2])
    local done = false
    while not done do
      local ties = redis.call('ZRANGE', KEYS[1], start, start + 99, 'WITHSCORES')
      if #ties == 0 then break end
      for i = 1, #ties, 2 do
        if tonumber(ties[i + 1]) ~= after or not upTo(ties[i], ARGV[3]) then done = true break end
        start = start + 1
      end
    end
  end
end
local limit, now, most = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local out = { 0, 0, '', '' }
local looked, found = 0, 0
while found < limit and looked < most do
  local batch = redis.call('ZRANGE', KEYS[1], start, start + math.min(limit - found, most - looked) - 1, 'WITHSCORES')
  if #batch == 0 then break end
  for i = 1, #batch, 2 do
    local id = batch[i]
    looked = looked + 1
    out[3], out[4] = batch[i + 1], id
    local exp = redis.call('ZSCORE', KEYS[2], id)
    local hash = (not exp or tonumber(exp) > now) and redis.call('HGETALL', ARGV[1] .. 'task:' .. id) or {}
    if #hash > 0 then
      found = found + 1
      out[#out + 1] = hash
      start = start + 1
    else
      -- Past its TTL (or gone): out of the principal's list for good, so no later page looks at it again.
      redis.call('ZREM', KEYS[1], id)
    end
  end
end
out[1] = looked
if found < limit and looked >= most and #redis.call('ZRANGE', KEYS[1], start, start) > 0 then out[2] = 1 end
return out
`)

/** One run of the list script: the task hashes it found and where it stopped. */
export interface ListRun {
  hashes: Array<Record<string, string>>
  /** Index entries looked at. */
  looked: number
  /** Where to go on from when the run stopped at LIST_VISIT_LIMIT before the page was full; undefined when done. */
  next: TaskCursor | undefined
}

function pairs (flat: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {}
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]!] = flat[i + 1]!
  return out
}

/** Runs the list script once for the principal's set `tasks` (full key). */
export async function listRun (
  redis: Redis, prefix: string, tasks: string, after: TaskCursor | undefined, limit: number, now: number,
): Promise<ListRun> {
  const reply = await run(redis, LIST_TASKS, [tasks, `${prefix}expiry`], [
    prefix, after ? String(after.createdAt) : '', after?.id ?? '', limit, now, LIST_VISIT_LIMIT,
  ]) as [number, number, string, string, ...string[][]]
  const [looked, more, createdAt, id, ...hashes] = reply
  return { hashes: hashes.map(pairs), looked, next: more === 1 ? { createdAt: Number(createdAt), id } : undefined }
}
