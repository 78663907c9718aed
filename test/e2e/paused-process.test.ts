import { randomUUID } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { CountingProxy } from '../helpers/counting-proxy.ts'
import { loggedLine, startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { legacyTask, next, RawSession } from '../helpers/raw-session.ts'
import { privateRedis, stopRedis } from '../helpers/private-redis.ts'
import { purge, REDIS_URL, STATE_SECRET } from '../helpers/redis.ts'
import { recordedInRedis, recordedInSqlite, startPair, startResumeUpstreams, type ResumeUpstreams } from '../helpers/resume.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const RESEARCH = 'simulate-research-query'
const LONG = 'trigger-long-running-operation'
const STAND_DOWN = 'lost its lease'
/** `store.lockStaleAfter` of the SQLite case: the second process may take the file over this long after the last heartbeat. */
const LOCK_STALE_MS = 3000

/** The tasks a paused process runs: one upstream task waiting for the client's answer, one plain call. */
interface Running {
  /** The client of the upstream task, and that of the plain call (another client: its own upstream session). */
  session: RawSession
  other: RawSession
  research: string
  long: string
  before: { research: number, long: number, responses: number }
}

/**
 * A gateway process is stopped (SIGSTOP) while it runs tasks, for longer than its lease; another process takes the
 * tasks over and finishes them (the client answers the upstream task's question through it); then the paused
 * process continues (SIGCONT). It must write nothing over what the new owner wrote, send no call and no answer a
 * second time, and say in its log that it lost its lease and stands down. On one Redis (two processes), and on one
 * SQLite file (the paused process's file lock lapses, a second process starts on the file and takes it over).
 */
describe('a gateway process paused past its lease is fenced', () => {
  const prefix = `mcpgw-paused:${randomUUID()}:`
  let upstreams: ResumeUpstreams
  let proxy: CountingProxy
  let redis: Redis
  const processes: GatewayProcess[] = []

  beforeAll(async () => {
    upstreams = await startResumeUpstreams()
    proxy = upstreams.everythingProxy
    redis = new Redis(REDIS_URL)
  }, 90_000)

  afterEach(async () => {
    // A process left stopped by a failed test would never exit on SIGTERM.
    for (const gateway of processes) gateway.child.kill('SIGCONT')
    await stopAll(processes)
  })

  afterAll(async () => {
    redis?.disconnect()
    await purge(prefix)
    await upstreams?.close()
  })

  function upstreamYaml (): string {
    return `upstreams:
  - { name: ev, transport: streamable-http, url: ${JSON.stringify(proxy.url)}, timeouts: { connect: 60s } }
`
  }

  /** Starts an upstream task that asks the client a question, and a plain call, through `a`; waits until both are under way. */
  async function startTasks (a: GatewayProcess, recorded: (ids: string[], kind: 'native' | 'stream') => Promise<void>): Promise<Running> {
    const session = await RawSession.open(a.url, { elicitation: { form: {} } })
    const other = await RawSession.open(a.url)
    const before = { research: proxy.count(`tools/call ${RESEARCH}`), long: proxy.count(`tools/call ${LONG}`), responses: proxy.count('response') }
    const research = await legacyTask(session, `ev__${RESEARCH}`, { topic: 'jaguar', ambiguous: true })
    const long = await legacyTask(other, `ev__${LONG}`, { duration: 3, steps: 3 })
    await recorded([research], 'native')
    await recorded([long], 'stream')
    await session.waitFor(research, ['input_required'])
    return { session, other, research, long, before }
  }

  /** Answers, through `b` (which took the tasks over), the question the upstream task asked; both tasks complete there. */
  async function finishThrough (b: GatewayProcess, running: Running): Promise<void> {
    const viaB = running.session.on(b.url)
    const controller = new AbortController()
    try {
      const stream = await viaB.stream({ taskResult: running.research }, controller.signal)
      const question = await next(stream, (m) => m.method === 'elicitation/create')
      await viaB.post({ jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { interpretation: 'the cat' } } })
      expect(JSON.stringify(await next(stream, (m) => 'result' in m || 'error' in m))).toContain('jaguar (the cat)')
    } finally {
      controller.abort()
    }
    expect((await running.other.on(b.url).waitFor(running.long, ['completed', 'failed', 'cancelled'])).status).toBe('completed')
  }

  /**
   * Continues `a`, waits for it to stand down, and checks that the tasks stay as `b` finished them, each call and answer
   * sent once. `shared`: `a` goes on serving from the store beside `b` (Redis); else it reports itself not ready (it lost
   * the SQLite file to `b`).
   */
  async function continueAndCheck (a: GatewayProcess, b: GatewayProcess, running: Running, shared: boolean): Promise<void> {
    const from = a.lines.length
    a.child.kill('SIGCONT')
    const standDown = JSON.parse(await loggedLine(a, STAND_DOWN, { from, timeoutMs: 30_000 })) as Json
    expect(standDown).toMatchObject({ level: 50 })
    // `a` answers a request, after everything it did on waking up.
    const ready = await fetch(new URL('/readyz', a.url))
    expect(ready.status).toBe(shared ? 200 : 503)
    for (const [client, taskId] of [[running.session, running.research], [running.other, running.long]] as const) {
      if (shared) expect((await client.on(a.url).request('tasks/get', { taskId })).result).toMatchObject({ status: 'completed' })
      const result = JSON.stringify((await client.on(b.url).request('tasks/result', { taskId })).result)
      expect(result).toContain(taskId === running.research ? 'jaguar (the cat)' : 'Long running operation completed')
      // The task's outcome is the one `b` stored; `a` stored none.
      expect(b.lines.some((line) => line.includes('"task finished"') && line.includes(taskId))).toBe(true)
      expect(a.lines.some((line) => line.includes('"task finished"') && line.includes(taskId))).toBe(false)
    }
    expect(proxy.count(`tools/call ${RESEARCH}`) - running.before.research).toBe(1)
    expect(proxy.count(`tools/call ${LONG}`) - running.before.long).toBe(1)
    expect(proxy.count('response') - running.before.responses).toBe(1)
  }

  /** Two processes on a Redis at `url`; `a` is paused and `b` takes over; `dropSignals` first cuts the pub/sub connections. */
  async function onRedis (url: string, client: Redis, dropSignals: boolean): Promise<void> {
    const file = writeConfig(`
store: { kind: redis, url: ${JSON.stringify(url)}, prefix: ${JSON.stringify(prefix)} }
server: { stateSecret: ${JSON.stringify(STATE_SECRET)} }
tasks: { pollInterval: 50ms, ownerLease: 2s }
${upstreamYaml()}`)
    const [a, b] = await startPair(file, processes)
    const running = await startTasks(a, async (ids, kind) => { await recordedInRedis(client, prefix, ids, kind) })
    const from = b.lines.length
    a.child.kill('SIGSTOP')
    // Signals between processes are at most once: the paused process misses those sent while its connection is down.
    if (dropSignals) await client.call('CLIENT', 'KILL', 'TYPE', 'pubsub')
    await loggedLine(b, 'took over the tasks of a lost gateway process', { from, timeoutMs: 30_000 })
    await finishThrough(b, running)
    await continueAndCheck(a, b, running, true)
  }

  it('on one Redis: after SIGCONT it overwrites nothing, sends nothing twice, and logs that it stands down', { timeout: 120_000 }, async () => {
    await onRedis(REDIS_URL, redis, false)
  })

  it('on one Redis, the signals to the paused process lost: the store\'s checks alone keep it from acting twice', { timeout: 120_000 }, async () => {
    const own = await privateRedis()
    try {
      await onRedis(own.url, own.client, true)
    } finally {
      await stopAll(processes)
      await stopRedis(own)
    }
  })

  it('on one SQLite file: the second process that took the file over keeps what it wrote after the first continues', { timeout: 150_000 }, async () => {
    const database = join(mkdtempSync(join(tmpdir(), 'gw-paused-')), 'gateway.db')
    const file = writeConfig(`
store: { kind: sqlite, path: ${JSON.stringify(database)}, lockStaleAfter: ${LOCK_STALE_MS}ms }
tasks: { pollInterval: 50ms, ownerLease: 2s }
${upstreamYaml()}`)
    const a = await startGatewayProcess(file)
    processes.push(a)
    const running = await startTasks(a, async (ids, kind) => { await recordedInSqlite(database, ids, kind) })
    a.child.kill('SIGSTOP')
    // The file is a's until its heartbeat is stale: a second process started before then is refused (GW_ERR_STORE_LOCKED).
    await staleHolder(database)
    const b = await startGatewayProcess(file)
    processes.push(b)
    await finishThrough(b, running)
    await continueAndCheck(a, b, running, false)
  })
})

/** Waits until the holder of the SQLite file has missed its heartbeats for longer than `store.lockStaleAfter`. */
async function staleHolder (database: string): Promise<void> {
  const reader = new Database(database, { readonly: true, fileMustExist: true })
  try {
    const holder = reader.prepare<[], { heartbeat: number }>('SELECT heartbeat FROM file_holder WHERE id = 1')
    await until('the paused holder of the file going stale', () => Date.now() - (holder.get()?.heartbeat ?? 0) > LOCK_STALE_MS ? true : undefined,
      { timeoutMs: LOCK_STALE_MS + 30_000, everyMs: 100 })
  } finally {
    reader.close()
  }
}
