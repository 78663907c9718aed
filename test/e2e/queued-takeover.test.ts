import { randomUUID } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { CountingProxy } from '../helpers/counting-proxy.ts'
import { startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { legacyTask, RawSession } from '../helpers/raw-session.ts'
import { purge, REDIS_URL, STATE_SECRET } from '../helpers/redis.ts'
import { expectCompleted, recordedInRedis, recordedInSqlite, startPair, startResumeUpstreams, type ResumeUpstreams } from '../helpers/resume.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const TOOL = 'trigger-long-running-operation'
const QUEUED = 'queued: upstream \'ev\' already runs its maxConcurrentCalls calls'

/**
 * Two gateway processes on one Redis in front of @modelcontextprotocol/server-everything over Streamable HTTP, with
 * two call slots on it. Five tasks are created through A: two are sent upstream (their streams can be replayed),
 * three wait for a slot of A. A is killed with SIGKILL: B resumes the two that were sent and starts the three that
 * never left A, so all five complete and the upstream ran each once. The same with one process on a SQLite file,
 * killed and started again.
 */
describe('tasks still waiting for a call slot when their process is killed', () => {
  const prefix = `mcpgw-queued:${randomUUID()}:`
  let upstreams: ResumeUpstreams
  let proxy: CountingProxy
  let redis: Redis
  let file: string
  const processes: GatewayProcess[] = []

  beforeAll(async () => {
    upstreams = await startResumeUpstreams()
    proxy = upstreams.everythingProxy
    redis = new Redis(REDIS_URL)
    file = writeConfig(`
store: { kind: redis, url: ${JSON.stringify(REDIS_URL)}, prefix: ${JSON.stringify(prefix)} }
server: { stateSecret: ${JSON.stringify(STATE_SECRET)} }
tasks: { pollInterval: 50ms, ownerLease: 2s }
upstreams:
  - { name: ev, transport: streamable-http, url: ${JSON.stringify(proxy.url)}, timeouts: { connect: 60s }, maxConcurrentCalls: 2 }
`)
  }, 90_000)

  afterEach(async () => { await stopAll(processes) })

  afterAll(async () => {
    await stopAll(processes)
    redis?.disconnect()
    await purge(prefix)
    await upstreams?.close()
  })

  it('SIGKILL of the owner: the survivor starts the queued tasks instead of failing them, each runs once upstream', { timeout: 90_000 }, async () => {
    const [a, b] = await startPair(file, processes)
    const session = await RawSession.open(a.url)
    const before = proxy.count(`tools/call ${TOOL}`)
    const taskIds: string[] = []
    for (let i = 0; i < 5; i++) taskIds.push(await legacyTask(session, `ev__${TOOL}`, { duration: 2, steps: 2 }))
    await recordedInRedis(redis, prefix, taskIds.slice(0, 2), 'stream')
    await queuedBehind(session, taskIds)
    expect(proxy.count(`tools/call ${TOOL}`) - before).toBe(2)

    a.child.kill('SIGKILL')
    await a.exited
    await expectAllCompleted(session.on(b.url), taskIds)
    expect(proxy.count(`tools/call ${TOOL}`) - before).toBe(5)
  })

  it('kill -9 of the only process on a SQLite file: the next one starts the queued tasks, each runs once upstream', { timeout: 90_000 }, async () => {
    const database = join(mkdtempSync(join(tmpdir(), 'gw-queued-')), 'gateway.db')
    const sqlite = writeConfig(`
store: { kind: sqlite, path: ${JSON.stringify(database)} }
tasks: { pollInterval: 50ms }
upstreams:
  - { name: ev, transport: streamable-http, url: ${JSON.stringify(proxy.url)}, timeouts: { connect: 60s }, maxConcurrentCalls: 2 }
`)
    const first = await startGatewayProcess(sqlite)
    processes.push(first)
    const session = await RawSession.open(first.url)
    const before = proxy.count(`tools/call ${TOOL}`)
    const taskIds: string[] = []
    for (let i = 0; i < 5; i++) taskIds.push(await legacyTask(session, `ev__${TOOL}`, { duration: 2, steps: 2 }))
    await recordedInSqlite(database, taskIds.slice(0, 2), 'stream')
    await queuedBehind(session, taskIds)
    expect(proxy.count(`tools/call ${TOOL}`) - before).toBe(2)

    first.child.kill('SIGKILL')
    await first.exited
    const second = await startGatewayProcess(sqlite)
    processes.push(second)
    await expectAllCompleted(session.on(second.url), taskIds)
    expect(proxy.count(`tools/call ${TOOL}`) - before).toBe(5)
  })
})

/** Waits until the last three of `taskIds` show that they wait for a call slot. */
async function queuedBehind (session: RawSession, taskIds: readonly string[]): Promise<void> {
  await until('three tasks waiting for a call slot', async () => {
    const tasks = await Promise.all(taskIds.slice(2).map(async (taskId) => (await session.request('tasks/get', { taskId })).result as Json))
    return tasks.every((task) => task.statusMessage === QUEUED) ? true : undefined
  })
}

/** Every task ends `completed` with the upstream's real result. */
async function expectAllCompleted (session: RawSession, taskIds: readonly string[]): Promise<void> {
  const ended = await Promise.all(taskIds.map(async (taskId) => await session.waitFor(taskId, ['completed', 'failed', 'cancelled'])))
  expect(ended.map((task) => `${String(task.status)} ${String(task.statusMessage ?? '')}`.trim())).toEqual(Array(5).fill('completed'))
  await expectCompleted(session, taskIds, () => 'Long running operation completed. Duration: 2 seconds')
}
