import { randomUUID } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest'
import type { CountingProxy } from '../helpers/counting-proxy.ts'
import { loggedLine, startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { legacyTask, RawSession } from '../helpers/raw-session.ts'
import { purge, REDIS_URL, STATE_SECRET } from '../helpers/redis.ts'
import { expectCompleted, recordedInRedis, recordedInSqlite, startResumeUpstreams, type ResumeUpstreams } from '../helpers/resume.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const LONG = 'trigger-long-running-operation'
const RESEARCH = 'simulate-research-query'
const QUEUED = 'queued: upstream \'ev\' already runs its maxConcurrentCalls calls'

/** A task of either tool, and the text its real result holds. */
interface Job { tool: typeof LONG | typeof RESEARCH, args: Json, result: string }

/** `steps` tells one test's plain calls from another's on the shared upstream (the result names only the duration). */
function long (duration: number, steps: number): Job {
  return { tool: LONG, args: { duration, steps }, result: `Long running operation completed. Duration: ${duration} seconds` }
}

function research (topic: string): Job {
  return { tool: RESEARCH, args: { topic }, result: `Research Report: ${topic}` }
}

/**
 * Gateway processes in front of @modelcontextprotocol/server-everything over Streamable HTTP (`simulate-research-query`
 * runs as the server's own task, `trigger-long-running-operation` is a plain call whose stream it replays), with a
 * bound on its call slots. Tasks created while every slot is taken wait in their process, marked unsent: when that
 * process is killed (SIGKILL) or shuts down (SIGTERM), another process on Redis, or the next one on a SQLite file,
 * starts them, and every task completes with the upstream having run it once.
 *
 * The tests run side by side (most of their time is spent waiting on the upstream and on leases): each has its
 * own key prefix or file, and counts only its own calls on the shared upstream, by their arguments.
 */
describe('tasks still waiting for a call slot when their process stops', () => {
  const prefixes: string[] = []
  let upstreams: ResumeUpstreams
  let proxy: CountingProxy
  let redis: Redis

  /** A fresh key prefix for one test's processes (removed at the end). */
  function freshPrefix (): string {
    const prefix = `mcpgw-queued:${randomUUID()}:`
    prefixes.push(prefix)
    return prefix
  }

  /** A config on Redis under `prefix` (shared by every process started on it) with `slots` call slots on the upstream. */
  function onRedis (prefix: string, slots: number, server = ''): string {
    return writeConfig(`
store: { kind: redis, url: ${JSON.stringify(REDIS_URL)}, prefix: ${JSON.stringify(prefix)} }
server: { stateSecret: ${JSON.stringify(STATE_SECRET)}${server} }
tasks: { pollInterval: 50ms, ownerLease: 2s }
upstreams:
  - { name: ev, transport: streamable-http, url: ${JSON.stringify(proxy.url)}, timeouts: { connect: 60s }, maxConcurrentCalls: ${slots} }
`)
  }

  /** A config on a SQLite file (a fresh one unless given); returns it and the file. */
  function onSqlite (slots: number, server = '', database = join(mkdtempSync(join(tmpdir(), 'gw-queued-')), 'gateway.db')): { config: string, database: string } {
    const config = writeConfig(`
store: { kind: sqlite, path: ${JSON.stringify(database)} }
${server === '' ? '' : `server: { ${server.slice(2)} }`}
tasks: { pollInterval: 50ms }
upstreams:
  - { name: ev, transport: streamable-http, url: ${JSON.stringify(proxy.url)}, timeouts: { connect: 60s }, maxConcurrentCalls: ${slots} }
`)
    return { config, database }
  }

  /** The processes of one test, stopped when it ends. */
  function processesOf (onTestFinished: TestContext['onTestFinished']): GatewayProcess[] {
    const processes: GatewayProcess[] = []
    onTestFinished(async () => { await stopAll(processes) })
    return processes
  }

  let starting: Promise<unknown> = Promise.resolve()

  /**
   * Starts a process on `config` once those started before it are up (or failed to): on a loaded machine
   * server-everything takes seconds to open a session, and many at once outlast a start.
   */
  async function startOne (config: string, processes: GatewayProcess[]): Promise<GatewayProcess> {
    const started = starting.then(async () => await startGatewayProcess(config))
    starting = started.catch(() => {})
    const gateway = await started
    processes.push(gateway)
    return gateway
  }

  /** Upstream calls of each tool with the arguments of one of `jobs` (a test's own: see `long`). */
  function callsOf (jobs: readonly Job[]): Json {
    const matches = (tool: string) => (args: Json) =>
      jobs.some((job) => job.tool === tool && Object.entries(job.args).every(([key, value]) => args[key] === value))
    return { [LONG]: proxy.countWhere(`tools/call ${LONG}`, matches(LONG)), [RESEARCH]: proxy.countWhere(`tools/call ${RESEARCH}`, matches(RESEARCH)) }
  }

  /** Creates the tasks one after the other (each takes a free slot, or waits behind those before it). */
  async function create (session: RawSession, jobs: readonly Job[]): Promise<string[]> {
    const taskIds: string[] = []
    for (const job of jobs) taskIds.push(await legacyTask(session, `ev__${job.tool}`, job.args))
    return taskIds
  }

  /**
   * Holds the only call slot of `gateway` with a plain call its client waits for (not a task: the shutdown's grace
   * waits for it, and cancels it at its end); resolves once the upstream has it. `duration` (seconds, at least 20)
   * tells it from another test's.
   */
  async function holdTheSlot (gateway: GatewayProcess, duration: number): Promise<void> {
    const session = await RawSession.open(gateway.url)
    // Its client is gone by the time the grace ends: the answer (an error) has nobody to tell.
    session.request('tools/call', { name: `ev__${LONG}`, arguments: { duration, steps: 1 } }).catch(() => {})
    await until('the upstream running the call that holds the slot', () => proxy.countWhere(`tools/call ${LONG}`, (args) => args.duration === duration) > 0 ? true : undefined)
  }

  beforeAll(async () => {
    upstreams = await startResumeUpstreams()
    proxy = upstreams.everythingProxy
    redis = new Redis(REDIS_URL)
  }, 90_000)

  afterAll(async () => {
    redis?.disconnect()
    await Promise.all(prefixes.map(async (prefix) => await purge(prefix)))
    await upstreams?.close()
  })

  it.concurrent('SIGKILL of the owner while 4 of 20 tasks wait for a slot: the survivor completes all 20, each run once upstream', { timeout: 180_000 }, async ({ onTestFinished }) => {
    const prefix = freshPrefix()
    const processes = processesOf(onTestFinished)
    const config = onRedis(prefix, 16)
    const [a, b] = await Promise.all([startOne(config, processes), startOne(config, processes)])
    const session = await RawSession.open(a.url)
    // 16 take the slots (8 plain calls, then 8 of the upstream's own tasks); 2 of each kind wait behind them.
    const jobs = [
      ...Array.from({ length: 8 }, () => long(8, 2)),
      ...Array.from({ length: 8 }, (_, i) => research(`failover ${i}`)),
      long(2, 2), long(3, 2), research('failover queued 0'), research('failover queued 1'),
    ]
    const taskIds = await create(session, jobs)
    await recordedInRedis(redis, prefix, taskIds.slice(0, 8), 'stream')
    await recordedInRedis(redis, prefix, taskIds.slice(8, 16), 'native')
    await queuedBehind(session, taskIds.slice(16))
    expect(callsOf(jobs)).toEqual({ [LONG]: 8, [RESEARCH]: 8 })

    a.child.kill('SIGKILL')
    await a.exited
    await expectAllCompleted(session.on(b.url), taskIds, jobs)
    expect(callsOf(jobs)).toEqual({ [LONG]: 10, [RESEARCH]: 10 })
  })

  it.concurrent('kill -9 of the only process on a SQLite file: the next one starts the queued tasks, each runs once upstream', { timeout: 180_000 }, async ({ onTestFinished }) => {
    const processes = processesOf(onTestFinished)
    const { config, database } = onSqlite(2)
    const first = await startOne(config, processes)
    const session = await RawSession.open(first.url)
    // The next process starts the queued task of the upstream's own task tool as one, once it has read the tool list.
    const jobs = [long(2, 3), long(2, 3), long(2, 3), research('restart queued'), long(3, 3)]
    const taskIds = await create(session, jobs)
    await recordedInSqlite(database, taskIds.slice(0, 2), 'stream')
    await queuedBehind(session, taskIds.slice(2))
    expect(callsOf(jobs)).toEqual({ [LONG]: 2, [RESEARCH]: 0 })

    first.child.kill('SIGKILL')
    await first.exited
    // Slots for all 5 on the next process: the tasks it starts run side by side, not one after the other.
    const second = await startOne(onSqlite(5, '', database).config, processes)
    await expectAllCompleted(session.on(second.url), taskIds, jobs)
    expect(callsOf(jobs)).toEqual({ [LONG]: 4, [RESEARCH]: 1 })
  })

  // Each queued task leaves at once: the grace waits only for the call that holds the slot, and its end finds no task left.
  // The grace starts after that hand-over, so a short one (1s) still finds the 3 tasks there if they were not handed over.
  const queuedJobs = (steps: number, topic: string): Job[] => [long(2, steps), long(3, steps), research(topic)]

  it.concurrent('SIGTERM of the owner: its queued tasks are handed over at once and the other process completes them, each run once', { timeout: 180_000 }, async ({ onTestFinished }) => {
    const processes = processesOf(onTestFinished)
    const prefix = freshPrefix()
    const jobs = queuedJobs(4, 'handed over on Redis')
    // One slot on the owner (the queue), one per task on the other process (they run side by side there).
    const [a, b] = await Promise.all([startOne(onRedis(prefix, 1, ', shutdownGrace: 1s'), processes), startOne(onRedis(prefix, 3), processes)])
    await holdTheSlot(a, 20)
    const session = await RawSession.open(a.url)
    const taskIds = await create(session, jobs)
    await queuedBehind(session, taskIds)

    const from = b.lines.length
    a.child.kill('SIGTERM')
    const taken = JSON.parse(await loggedLine(b, 'took over the tasks of a lost gateway process', { from })) as Json
    expect(taken).toMatchObject({ started: 3, resumed: 0, rerun: 0, failed: 0 })
    await expectAllCompleted(session.on(b.url), taskIds, jobs)
    expect(callsOf(jobs)).toEqual({ [LONG]: 2, [RESEARCH]: 1 })
    await a.exited
    expectHandedOverAtOnce(a)
  })

  it.concurrent('SIGTERM of the only process on a SQLite file: the next one starts its queued tasks, each runs once upstream', { timeout: 180_000 }, async ({ onTestFinished }) => {
    const processes = processesOf(onTestFinished)
    const jobs = queuedJobs(5, 'handed over on SQLite')
    const { config, database } = onSqlite(1, ', shutdownGrace: 1s')
    const first = await startOne(config, processes)
    await holdTheSlot(first, 21)
    const session = await RawSession.open(first.url)
    const taskIds = await create(session, jobs)
    await queuedBehind(session, taskIds)

    first.child.kill('SIGTERM')
    await first.exited
    expectHandedOverAtOnce(first)
    // A slot per task on the next process: they run side by side there.
    const second = await startOne(onSqlite(3, '', database).config, processes)
    const recovered = JSON.parse(await loggedLine(second, 'recovered tasks interrupted by a restart')) as Json
    expect(recovered).toMatchObject({ started: 3, resumed: 0, rerun: 0, failed: 0 })
    await expectAllCompleted(session.on(second.url), taskIds, jobs)
    expect(callsOf(jobs)).toEqual({ [LONG]: 2, [RESEARCH]: 1 })
  })
})

/** The stopped process handed its 3 queued tasks over before its grace, and had none left when the grace ended. */
function expectHandedOverAtOnce (gateway: GatewayProcess): void {
  const logged = (msg: string): Json | undefined => gateway.lines.map((line) => JSON.parse(line) as Json).find((line) => line.msg === msg)
  expect(logged('handed running tasks over')).toMatchObject({ handedOver: 3 })
  expect(logged('shutdown grace over: cancelling in-flight requests and tasks')).toMatchObject({ requests: 1, tasks: 0 })
}

/** Waits until every one of `taskIds` shows that it waits for a call slot. */
async function queuedBehind (session: RawSession, taskIds: readonly string[]): Promise<void> {
  await until(`${taskIds.length} tasks waiting for a call slot`, async () => {
    const tasks = await Promise.all(taskIds.map(async (taskId) => (await session.request('tasks/get', { taskId })).result as Json))
    return tasks.every((task) => task.statusMessage === QUEUED) ? true : undefined
  })
}

/** Every task ends `completed` with the upstream's real result. */
async function expectAllCompleted (session: RawSession, taskIds: readonly string[], jobs: readonly Job[]): Promise<void> {
  const ended = await Promise.all(taskIds.map(async (taskId) => await session.waitFor(taskId, ['completed', 'failed', 'cancelled'])))
  expect(ended.map((task) => `${String(task.status)} ${String(task.statusMessage ?? '')}`.trim())).toEqual(Array(taskIds.length).fill('completed'))
  await expectCompleted(session, taskIds, (i) => jobs[i]!.result)
}
