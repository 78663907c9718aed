import { createHash } from 'node:crypto'
import type { Redis } from 'ioredis'
import { TASK_STATUSES, TERMINAL_STATUSES, TRANSITIONS } from '../../wire/task-state.ts'

/** A Lua script run with EVALSHA (loaded on first use). Each script states its contract at its top. */
export interface Script {
  source: string
  sha: string
}

export function script (source: string): Script {
  return { source, sha: createHash('sha1').update(source).digest('hex') }
}

export async function run (redis: Redis, s: Script, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> {
  try {
    return await redis.evalsha(s.sha, keys.length, ...keys, ...args)
  } catch (err) {
    if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err
    return await redis.eval(s.source, keys.length, ...keys, ...args)
  }
}

/**
 * The Lua helper the scripts that change a task share: appends `entry` to the timeline list `key`, keeps its
 * newest `limit` entries and gives the list the remaining lifetime of `owner` (the task or input hash), so a
 * timeline never outlives what it describes. A task stored before timelines existed gets none.
 */
const APPEND = `
local function append (key, entry, limit, owner)
  if redis.call('EXISTS', key) == 0 then return end
  redis.call('RPUSH', key, entry)
  redis.call('LTRIM', key, -tonumber(limit), -1)
  local ttl = redis.call('PTTL', owner)
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
end
`

/** A Lua table with `true` at each of `keys` (JSON strings are Lua strings for these plain names). */
function luaSet (keys: readonly string[]): string {
  return `{${keys.map((key) => ` [${JSON.stringify(key)}] = true`).join(',')} }`
}

/**
 * task-state.ts's table as Lua, generated once when this module loads, for the scripts that check a status:
 * `moves[from][to]` is true for each move of the table, `terminal[status]` for each terminal status.
 */
const STATUS_TABLE = `
local moves = { ${TASK_STATUSES.map((from) => `[${JSON.stringify(from)}] = ${luaSet(TRANSITIONS[from])}`).join(', ')} }
local terminal = ${luaSet(TERMINAL_STATUSES)}
`

/**
 * Compare-and-set of a task's status, with its timeline entry.
 * KEYS[1] task hash, KEYS[2] the task's timeline (list). ARGV[1] prefix, ARGV[2] task id, ARGV[3] now (ms),
 * ARGV[4] new status, ARGV[5] '1' to set the statusMessage to ARGV[6] (a JSON string or null), ARGV[7] '1' to
 * set the outcome to ARGV[8] (JSON), ARGV[9] the timeline entry (JSON), ARGV[10] the most entries a timeline
 * keeps, ARGV[11] '1' to set how the upstream work is reached again to ARGV[12] (JSON, '' for none),
 * ARGV[13] the outcome's bytes, ARGV[14] the most bytes the task's account may store ('' for no limit),
 * ARGV[15] the owner the task must have ('' for any: TaskPatch.asOwner), ARGV[16..] the statuses it may be in.
 * Returns the task hash (HGETALL) after the move, or false when the task is unknown, expired, in none of
 * the given statuses, owned by another process than ARGV[15], or the table has no move from its status to
 * the new one (a terminal status has none),
 * or { 'over', stored, adding } when the outcome would take the account past ARGV[14] (nothing changes).
 * Terminal moves also drop the task from the active sets and from its owner's set, its request (only a
 * running task needs its arguments, to run again after a takeover) and how its upstream work is reached.
 * The bytes the move frees (the request of a task that ends) and adds (its outcome) are counted in the task's
 * entry of `taskbytes` and in its account's `bytes:<account>`.
 */
export const TRANSITION = script(APPEND + STATUS_TABLE + `
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return false end
local exp = redis.call('HGET', KEYS[1], 'exp')
if exp and exp ~= '' and tonumber(exp) <= tonumber(ARGV[3]) then return false end
if not (moves[status] and moves[status][ARGV[4]]) then return false end
local allowed = false
for i = 16, #ARGV do
  if ARGV[i] == status then allowed = true end
end
if not allowed then return false end
if ARGV[15] ~= '' and redis.call('HGET', KEYS[1], 'owner') ~= ARGV[15] then return false end
local account = redis.call('HGET', KEYS[1], 'acct') or redis.call('HGET', KEYS[1], 'principal')
local change = 0
if terminal[ARGV[4]] then change = change - tonumber(redis.call('HGET', KEYS[1], 'rb') or '0') end
if ARGV[7] == '1' then change = change + tonumber(ARGV[13]) - tonumber(redis.call('HGET', KEYS[1], 'ob') or '0') end
if ARGV[14] ~= '' and change > 0 then
  local stored = tonumber(redis.call('GET', ARGV[1] .. 'bytes:' .. account) or '0')
  if stored + change > tonumber(ARGV[14]) then return { 'over', stored, change } end
end
redis.call('HSET', KEYS[1], 'status', ARGV[4], 'upd', ARGV[3])
if ARGV[5] == '1' then redis.call('HSET', KEYS[1], 'msg', ARGV[6]) end
if ARGV[7] == '1' then redis.call('HSET', KEYS[1], 'out', ARGV[8], 'ob', ARGV[13]) end
if ARGV[11] == '1' then redis.call('HSET', KEYS[1], 'res', ARGV[12]) end
if change ~= 0 then
  redis.call('HINCRBY', ARGV[1] .. 'taskbytes', ARGV[2], change)
  redis.call('INCRBY', ARGV[1] .. 'bytes:' .. account, change)
end
if terminal[ARGV[4]] then
  redis.call('ZREM', ARGV[1] .. 'active:' .. account, ARGV[2])
  redis.call('ZREM', ARGV[1] .. 'active', ARGV[2])
  local owner = redis.call('HGET', KEYS[1], 'owner')
  if owner then redis.call('SREM', ARGV[1] .. 'owned:' .. owner, ARGV[2]) end
  redis.call('HSET', KEYS[1], 'req', '{}', 'res', '', 'rb', '0')
end
append(KEYS[2], ARGV[9], ARGV[10], KEYS[1])
return redis.call('HGETALL', KEYS[1])
`)

/**
 * Compare-and-set of a task's owner (a process taking over the tasks of one whose lease lapsed).
 * KEYS[1] task hash, KEYS[2] the old owner's task set, KEYS[3] the new owner's task set, KEYS[4] the task's
 * timeline. ARGV[1] task id, ARGV[2] the expected owner, ARGV[3] the new owner, ARGV[4] now (ms), ARGV[5] the
 * timeline entry (JSON), ARGV[6] the most entries a timeline keeps.
 * Returns the task hash after the move, or false when the task is unknown, expired, terminal or owned by
 * someone else; a task that is no longer the old owner's leaves the old owner's set either way.
 */
export const CLAIM = script(APPEND + STATUS_TABLE + `
local status = redis.call('HGET', KEYS[1], 'status')
local owner = redis.call('HGET', KEYS[1], 'owner')
local exp = redis.call('HGET', KEYS[1], 'exp')
local expired = exp and exp ~= '' and tonumber(exp) <= tonumber(ARGV[4])
if not status or expired or terminal[status] or owner ~= ARGV[2] then
  if owner ~= ARGV[2] or not status or terminal[status] then
    redis.call('SREM', KEYS[2], ARGV[1])
  end
  return false
end
redis.call('HSET', KEYS[1], 'owner', ARGV[3])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
append(KEYS[4], ARGV[5], ARGV[6], KEYS[1])
return redis.call('HGETALL', KEYS[1])
`)

/**
 * Queues an input request unless its task already holds too many pending ones.
 * KEYS[1] task hash, KEYS[2] the task's input list, KEYS[3] input hash, KEYS[4] the task's timeline. ARGV[1] max
 * pending, ARGV[2] input body (JSON), ARGV[3] input key, ARGV[4] expiry of the keys in ms from now, ARGV[5] prefix
 * of input hashes, ARGV[6] the timeline entry (JSON), ARGV[7] the most entries a timeline keeps, ARGV[8] the
 * prefix, ARGV[9] the input's bytes, ARGV[10] the most bytes the task's account may store ('' for no limit),
 * ARGV[11] the task id.
 * Returns 1 when queued, -1 when the task is unknown, -2 when the limit is reached, { 'over', stored } when the
 * input would take the account past ARGV[10].
 */
export const ADD_INPUT = script(APPEND + `
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local pending = 0
for _, key in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  if redis.call('HGET', ARGV[5] .. key, 'state') == 'pending' then pending = pending + 1 end
end
if pending >= tonumber(ARGV[1]) then return -2 end
local counter = ARGV[8] .. 'bytes:' .. (redis.call('HGET', KEYS[1], 'acct') or redis.call('HGET', KEYS[1], 'principal'))
local stored = tonumber(redis.call('GET', counter) or '0')
if ARGV[10] ~= '' and tonumber(ARGV[9]) > 0 and stored + tonumber(ARGV[9]) > tonumber(ARGV[10]) then return { 'over', stored } end
redis.call('HINCRBY', ARGV[8] .. 'taskbytes', ARGV[11], ARGV[9])
redis.call('INCRBY', counter, ARGV[9])
redis.call('HSET', KEYS[3], 'body', ARGV[2], 'state', 'pending', 'answer', '')
redis.call('RPUSH', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
append(KEYS[4], ARGV[6], ARGV[7], KEYS[1])
return 1
`)

/**
 * Settles a pending input, with its entry in its task's timeline (whose key derives from the task id in the
 * input's body).
 * KEYS[1] input hash. ARGV[1] new state, ARGV[2] answer (JSON or ''), ARGV[3] prefix, ARGV[4] the timeline
 * entry (JSON), ARGV[5] the most entries a timeline keeps. The answer's bytes are counted for the task's account.
 * Returns 1 when the input was pending and is now settled, else 0.
 */
export const SETTLE_INPUT = script(APPEND + `
if redis.call('HGET', KEYS[1], 'state') ~= 'pending' then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'answer', ARGV[2])
local taskId = cjson.decode(redis.call('HGET', KEYS[1], 'body')).taskId
local task = ARGV[3] .. 'task:' .. taskId
if #ARGV[2] > 0 and redis.call('EXISTS', task) == 1 then
  redis.call('HINCRBY', ARGV[3] .. 'taskbytes', taskId, #ARGV[2])
  redis.call('INCRBY', ARGV[3] .. 'bytes:' .. (redis.call('HGET', task, 'acct') or redis.call('HGET', task, 'principal')), #ARGV[2])
end
append(ARGV[3] .. 'events:' .. taskId, ARGV[4], ARGV[5], KEYS[1])
return 1
`)

/**
 * Records use of a session, moving lastSeenAt forward only.
 * KEYS[1] session hash, KEYS[2] sessions by last use (sorted set). ARGV[1] session id, ARGV[2] now.
 * Returns 1 when the session exists.
 */
export const TOUCH_SESSION = script(`
local seen = redis.call('HGET', KEYS[1], 'seen')
if not seen then return 0 end
if tonumber(ARGV[2]) > tonumber(seen) then
  redis.call('HSET', KEYS[1], 'seen', ARGV[2])
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
end
return 1
`)

/**
 * Deletes tasks past their TTL with everything that refers to them, atomically per call (so an input
 * queued while a task is swept cannot outlive it), and takes their bytes off their accounts: from `taskbytes`
 * and `taskacct`, which outlive a task hash that Redis's own key expiry deleted (a store nobody swept for a day).
 * No KEYS (the keys derive from the ids found). ARGV[1] prefix, ARGV[2] now (ms), ARGV[3] at most this
 * many tasks. Returns how many tasks were deleted.
 */
export const SWEEP = script(`
local p = ARGV[1]
local ids = redis.call('ZRANGEBYSCORE', p .. 'expiry', '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  local key = p .. 'task:' .. id
  local principal = redis.call('HGET', key, 'principal')
  local account = redis.call('HGET', p .. 'taskacct', id) or redis.call('HGET', key, 'acct') or principal
  local owner = redis.call('HGET', key, 'owner')
  local bytes = tonumber(redis.call('HGET', p .. 'taskbytes', id) or '0')
  if account and bytes ~= 0 and redis.call('DECRBY', p .. 'bytes:' .. account, bytes) <= 0 then
    redis.call('DEL', p .. 'bytes:' .. account)
  end
  redis.call('HDEL', p .. 'taskbytes', id)
  redis.call('HDEL', p .. 'taskacct', id)
  for _, input in ipairs(redis.call('LRANGE', p .. 'inputs:' .. id, 0, -1)) do
    redis.call('DEL', p .. 'input:' .. input)
  end
  redis.call('DEL', key, p .. 'inputs:' .. id, p .. 'events:' .. id)
  redis.call('ZREM', p .. 'expiry', id)
  redis.call('ZREM', p .. 'active', id)
  redis.call('ZREM', p .. 'created', id)
  if principal then redis.call('ZREM', p .. 'tasks:' .. principal, id) end
  if account then redis.call('ZREM', p .. 'active:' .. account, id) end
  if owner then redis.call('SREM', p .. 'owned:' .. owner, id) end
end
return #ids
`)

/**
 * Stores a new task, refusing it when its account already has too many unfinished tasks or would store too
 * many bytes: the checks and the writes are one step, so racing creates on any number of processes never
 * overshoot the limits.
 * KEYS[1] task hash, KEYS[2] the principal's tasks (sorted set), KEYS[3] the account's unfinished tasks
 * by expiry, KEYS[4] every unfinished task, KEYS[5] the owner's task set, KEYS[6] tasks by expiry, KEYS[7] every
 * task by createdAt, KEYS[8] the task's timeline, KEYS[9] the bytes the account's tasks store, KEYS[10] the bytes
 * of each task (hash), KEYS[11] the account of each task (hash).
 * ARGV[1] the limit ('' for none), ARGV[2] createdAt (ms; also the `now` of the count), ARGV[3] task id,
 * ARGV[4] expiry (ms, '' for none), ARGV[5] '1' when the task is not terminal, ARGV[6] key expiry (ms),
 * ARGV[7] the first timeline entry (JSON), ARGV[8] the task's bytes, ARGV[9] the most bytes the account may
 * store ('' for no limit), ARGV[10] the account, ARGV[11..] the hash's field/value pairs.
 * Returns 0 when stored, the count that reached the limit, or { 'over', stored } when the task's bytes would
 * take the account past ARGV[9] (nothing is written either way).
 */
export const CREATE_TASK = script(`
if ARGV[1] ~= '' then
  local active = redis.call('ZCOUNT', KEYS[3], '(' .. ARGV[2], '+inf')
  if active >= tonumber(ARGV[1]) then return active end
end
if ARGV[9] ~= '' and tonumber(ARGV[8]) > 0 then
  local stored = tonumber(redis.call('GET', KEYS[9]) or '0')
  if stored + tonumber(ARGV[8]) > tonumber(ARGV[9]) then return { 'over', stored } end
end
redis.call('INCRBY', KEYS[9], ARGV[8])
redis.call('HSET', KEYS[10], ARGV[3], ARGV[8])
redis.call('HSET', KEYS[11], ARGV[3], ARGV[10])
local fields = {}
for i = 11, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('RPUSH', KEYS[8], ARGV[7])
redis.call('PEXPIRE', KEYS[8], ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[7], ARGV[2], ARGV[3])
if ARGV[5] == '1' then
  redis.call('ZADD', KEYS[3], ARGV[4] == '' and '+inf' or ARGV[4], ARGV[3])
  redis.call('ZADD', KEYS[4], ARGV[2], ARGV[3])
  redis.call('SADD', KEYS[5], ARGV[3])
end
if ARGV[4] ~= '' then redis.call('ZADD', KEYS[6], ARGV[4], ARGV[3]) end
return 0
`)

/**
 * Stores a new session, refusing it when its account already holds too many sessions or its bytes would take
 * the account past its budget of stored bytes: the checks and the writes are one step.
 * KEYS[1] session hash, KEYS[2] sessions by last use, KEYS[3] the account's session set, KEYS[4] the bytes the
 * account stores. ARGV[1] session id, ARGV[2] body (JSON), ARGV[3] lastSeenAt, ARGV[4] principal, ARGV[5]
 * account, ARGV[6] the session's bytes, ARGV[7] the most bytes the account may store ('' for no limit),
 * ARGV[8] the most sessions the account may hold ('' for no limit).
 * Returns 0 when stored, { 'sessions' } or { 'over', stored } (nothing is written).
 */
export const CREATE_SESSION = script(`
if ARGV[8] ~= '' and redis.call('SCARD', KEYS[3]) >= tonumber(ARGV[8]) then return { 'sessions' } end
if ARGV[7] ~= '' and tonumber(ARGV[6]) > 0 then
  local stored = tonumber(redis.call('GET', KEYS[4]) or '0')
  if stored + tonumber(ARGV[6]) > tonumber(ARGV[7]) then return { 'over', stored } end
end
redis.call('HSET', KEYS[1], 'body', ARGV[2], 'seen', ARGV[3], 'principal', ARGV[4], 'acct', ARGV[5], 'bytes', ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('INCRBY', KEYS[4], ARGV[6])
return 0
`)

/**
 * Deletes sessions with their index entries, and takes their bytes off their accounts, each exactly once
 * (of two racing deletes of one session, one counts it).
 * No KEYS (the keys derive from the ids). ARGV[1] prefix, ARGV[2..] session ids. Returns how many existed.
 * Sessions stored before accounts existed count under their principal and hold no bytes.
 */
export const REMOVE_SESSIONS = script(`
local p = ARGV[1]
local removed = 0
for i = 2, #ARGV do
  local key = p .. 'session:' .. ARGV[i]
  local fields = redis.call('HMGET', key, 'acct', 'principal', 'bytes')
  if redis.call('DEL', key) == 1 then
    removed = removed + 1
    local account = fields[1] or fields[2]
    if account then
      redis.call('SREM', p .. 'psessions:' .. account, ARGV[i])
      local bytes = tonumber(fields[3] or '0')
      if bytes ~= 0 and redis.call('DECRBY', p .. 'bytes:' .. account, bytes) <= 0 then redis.call('DEL', p .. 'bytes:' .. account) end
    end
  end
  redis.call('ZREM', p .. 'sessions', ARGV[i])
end
return removed
`)
