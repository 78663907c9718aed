import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { fetch } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { DEMO_MAIN } from '../helpers/built.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { legacyTask, next, RawSession } from '../helpers/raw-session.ts'
import { purge, REDIS_URL, STATE_SECRET } from '../helpers/redis.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

/** Legacy sessions, one per worker: even ones end with DELETE, odd ones idle past sessionIdleTimeout. */
const SESSIONS = 10
const QUICK_PER_SESSION = 20
const MODERN_QUICK = 100
/** Short, yet long enough for a worker to answer and read its tasks back on a machine loaded by other jobs (4 s and 10 s were not). */
const TTL_MS = 20_000

async function keysUnder (redis: Redis, prefix: string): Promise<string[]> {
  const keys: string[] = []
  let cursor = '0'
  do {
    const [nextCursor, page] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    cursor = nextCursor
    keys.push(...page.map((key) => key.slice(prefix.length)))
  } while (cursor !== '0')
  return keys.sort()
}

/** One legacy session's share: quick tasks read back, failed ones, answered and unanswered input, cancels. */
async function legacyWorker (url: string, index: number): Promise<number> {
  const session = await RawSession.open(url, { elicitation: { form: {} } })
  const quick = await Promise.all(Array.from({ length: QUICK_PER_SESSION }, (_, i) => legacyTask(session, 'demo__slow', { duration: i % 4 * 5, steps: 1 }, TTL_MS)))
  for (const taskId of quick.slice(0, 4)) expect((await session.waitFor(taskId, ['completed'])).status).toBe('completed')
  const first = await session.request('tasks/result', { taskId: quick[0] })
  expect(JSON.stringify(first.result), JSON.stringify(first)).toContain('slow finished')
  const failed = await legacyTask(session, 'demo__throw_error', { code: -32011, message: 'soak' }, TTL_MS)
  expect((await session.waitFor(failed, ['failed'])).status).toBe('failed')

  const asked = await legacyTask(session, 'demo__ask_user', { message: `soak ${index}` }, TTL_MS)
  const controller = new AbortController()
  const stream = await session.stream({ taskResult: asked }, controller.signal)
  const request = await next(stream, (m) => m.method === 'elicitation/create')
  expect((await session.post({ jsonrpc: '2.0', id: request.id, result: { action: 'accept', content: { name: 'Soak' } } })).status).toBe(202)
  expect(JSON.stringify((await next(stream, (m) => 'result' in m)).result)).toContain('Hello, Soak!')
  controller.abort()
  const unanswered = await legacyTask(session, 'demo__ask_user', {}, TTL_MS)
  await session.waitFor(unanswered, ['input_required'])

  const long = await Promise.all([0, 1, 2].map(async () => await legacyTask(session, 'demo__slow', { duration: 60_000, steps: 1 }, TTL_MS)))
  expect((await session.request('tasks/cancel', { taskId: long[0] })).result).toMatchObject({ status: 'cancelled' })
  // The other two (and the unanswered input) end with the session: DELETE cancels them, an idle expiry too.
  if (index % 2 === 0) expect((await fetch(url, { method: 'DELETE', headers: { 'mcp-session-id': session.sessionId } })).status).toBe(200)
  return quick.length + long.length + 3
}

/** The modern era's share: quick tasks, answered and unanswered input (tasks/update), cancels. */
async function modernWorker (url: string): Promise<number> {
  const client = ModernRaw.withTasks(url, { elicitation: { form: {} } })
  const create = async (name: string, args: Json): Promise<string> => String((await client.result('tools/call', { name, arguments: args })).taskId)
  const quick = await Promise.all(Array.from({ length: MODERN_QUICK }, (_, i) => create('demo__slow', { duration: i % 3 * 5, steps: 1 })))
  expect((await client.waitFor(quick[0]!, ['completed'])).status).toBe('completed')
  const asked = await Promise.all([0, 1, 2, 3].map(async () => await create('demo__ask_user', { message: 'modern soak' })))
  for (const taskId of asked.slice(0, 2)) {
    const waiting = await client.waitFor(taskId, ['input_required'])
    const [key] = Object.keys(waiting.inputRequests as Json)
    await client.result('tasks/update', { taskId, inputResponses: { [key!]: { action: 'accept', content: { name: 'Mo' } } } })
    expect((await client.waitFor(taskId, ['completed'])).result).toMatchObject({ content: [{ text: 'Hello, Mo!' }] })
  }
  const long = await Promise.all(Array.from({ length: 10 }, async () => await create('demo__slow', { duration: 60_000, steps: 1 })))
  for (const taskId of long.slice(0, 5)) await client.result('tasks/cancel', { taskId })
  return quick.length + asked.length + long.length
}

/**
 * A gateway on a fresh Redis key prefix runs a few hundred short-lived tasks of both eras (completed,
 * failed, with answered and unanswered input, cancelled, cut off by their TTL) and sessions that are
 * deleted or expire; once every TTL has passed and the sweeps have run, the prefix holds exactly what it
 * held before:
 *   owners   the leases of live gateway processes (one entry per process; an entry of a lost process
 *            stays until another process has taken its tasks over): here, this one process.
 * Everything else is per task (task:, inputs:, input:), per session (session:), per client while it has
 * upstream sessions (home:) or an index that Redis deletes once empty (tasks:<principal>, active:<principal>,
 * active, expiry, owned:<owner>, sessions).
 */
describe('Redis keys over many short-lived tasks and sessions', () => {
  const prefix = `mcpgw-soak:${randomUUID()}:`
  let gw: RunningGateway
  let redis: Redis
  let demo: StartedUpstream

  beforeAll(async () => {
    redis = new Redis(REDIS_URL)
    // Over HTTP: each client's upstream session is cheap (over stdio each is a process of its own).
    demo = await startUpstream(DEMO_MAIN, ['--http', '0'])
    gw = await startGateway({
      store: { kind: 'redis', url: REDIS_URL, prefix },
      // Far above the longest pause between two requests of a worker on a loaded machine (a session whose
      // requests stop for a while, awaiting twenty task creations, is idle to the gateway), and no later than
      // the tasks' TTL, so the run ends when the tasks expire.
      server: { sessionIdleTimeout: '20s', stateSecret: STATE_SECRET },
      tasks: { defaultTtl: `${TTL_MS}ms`, maxTtl: `${TTL_MS}ms`, sweepInterval: '200ms', pollInterval: '50ms', decide: 'always', maxActivePerPrincipal: 1000 },
      // A client's upstream session (and with it the record of which process serves the client) ends with the
      // client's session, or once unused for idleTimeout (2026-07-28 clients have no session to end).
      upstreams: [{ name: 'demo', transport: 'streamable-http', url: demo.url, maxConcurrentCalls: 64, idleTimeout: '1s' }],
    })
  })

  afterAll(async () => {
    await gw?.close()
    await demo?.close()
    await purge(prefix)
    await redis?.quit()
  })

  it('leaves only the live process\'s lease and the store\'s markers once every task and session is past its TTL', async () => {
    const baseline = await keysUnder(redis, prefix)
    expect(baseline).toEqual(['epoch', 'owners', 'revisions'])

    const counts = await Promise.all([
      ...Array.from({ length: SESSIONS }, async (_, i) => await legacyWorker(gw.url, i)),
      modernWorker(gw.url),
    ])
    const tasks = counts.reduce((a, b) => a + b, 0)
    expect(tasks).toBeGreaterThanOrEqual(350)
    const peak = await keysUnder(redis, prefix)
    expect(peak.length).toBeGreaterThan(baseline.length)

    let last: string[] = []
    await until('the keys to return to the baseline', async () => {
      last = await keysUnder(redis, prefix)
      return last.length === baseline.length ? last : undefined
    }, { timeoutMs: 60_000, everyMs: 100, describeLast: () => `; left: ${JSON.stringify(last.slice(0, 20))} (${last.length} keys)` })
    expect(last).toEqual(baseline)
    expect(gw.logs().filter((l) => typeof l.msg === 'string' && /failed|unhandled/i.test(l.msg) && l.msg !== 'request failed')).toEqual([])

    // A gateway that stops cleanly gives its lease up: nothing is left but the store's epoch (kept for good: its
    // absence is how the next process tells an emptied Redis) and the mark that its stored eras are revisions.
    await gw.close()
    expect(await keysUnder(redis, prefix)).toEqual(['epoch', 'revisions'])
  }, 180_000)
})
