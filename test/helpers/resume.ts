import Database from 'better-sqlite3'
import type { Redis } from 'ioredis'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { expect } from 'vitest'
import type { GatewayStore } from '../../src/store/types.ts'
import { CountingProxy } from './counting-proxy.ts'
import { startGatewayProcess, type GatewayProcess } from './process.ts'
import type { RawSession } from './raw-session.ts'
import { until } from './until.ts'

/** What a task records so that another process can resume it: its upstream's own task, or its call's replayable stream. */
export type ResumeKind = 'native' | 'stream'

function names (res: string | null | undefined, kind: ResumeKind): boolean {
  return typeof res === 'string' && res.includes(`"kind":"${kind}"`)
}

/** Waits until a Redis store (keys under `prefix`) records for every task how its upstream work is reached again. */
export async function recordedInRedis (redis: Redis, prefix: string, taskIds: readonly string[], kind: ResumeKind): Promise<void> {
  await until(`every task recording its ${kind === 'native' ? 'upstream task' : 'replayable stream'}`, async () => {
    const stored = await Promise.all(taskIds.map(async (id) => await redis.hget(`${prefix}task:${id}`, 'res')))
    return stored.every((res) => names(res, kind)) ? true : undefined
  })
}

/** The same through a store of the test's own on the processes' data (any kind: see shared-store.ts). */
export async function recordedInStore (store: GatewayStore, taskIds: readonly string[], kind: ResumeKind): Promise<void> {
  await until(`every task recording its ${kind === 'native' ? 'upstream task' : 'replayable stream'}`, async () => {
    const stored = await Promise.all(taskIds.map(async (id) => await store.tasks.get(id, Date.now())))
    return stored.every((task) => task?.resume?.kind === kind) ? true : undefined
  })
}

/** The same for a SQLite file a gateway process holds (read beside it, read-only). */
export async function recordedInSqlite (database: string, taskIds: readonly string[], kind: ResumeKind): Promise<void> {
  const reader = new Database(database, { readonly: true, fileMustExist: true })
  try {
    const resumeOf = reader.prepare<[string], { resume: string | null }>('SELECT resume FROM tasks WHERE id = ?')
    await until(`every task recording its ${kind === 'native' ? 'upstream task' : 'replayable stream'}`, async () => {
      return taskIds.every((id) => names(resumeOf.get(id)?.resume, kind)) ? true : undefined
    })
  } finally {
    reader.close()
  }
}

/**
 * The two upstreams the resume tests run in front of, each behind a counting proxy: @modelcontextprotocol/
 * server-everything over Streamable HTTP (its own task tool, and plain calls it replays with its own event store)
 * and the replayable-stream fixture. `replayable` may be restarted by a test (then retarget `replayProxy`).
 */
export interface ResumeUpstreams {
  everything: StartedUpstream
  replayable: StartedUpstream
  everythingProxy: CountingProxy
  replayProxy: CountingProxy
  close (): Promise<void>
}

export async function startResumeUpstreams (): Promise<ResumeUpstreams> {
  const [everything, replayable] = await Promise.all([
    startUpstream('test/fixtures/everything-http.mjs', [], { readyTimeoutMs: 60_000 }),
    startUpstream('test/fixtures/replayable-upstream.ts', ['--port', '0']),
  ])
  const everythingProxy = new CountingProxy(everything.url)
  const replayProxy = new CountingProxy(replayable.url)
  await Promise.all([everythingProxy.listen(), replayProxy.listen()])
  const upstreams: ResumeUpstreams = {
    everything,
    replayable,
    everythingProxy,
    replayProxy,
    close: async () => {
      await Promise.all([everythingProxy.close(), replayProxy.close()])
      await Promise.all([upstreams.everything.close(), upstreams.replayable.close()])
    },
  }
  return upstreams
}

/**
 * Waits for each task to end, through `session`, and checks that it completed with a result (tasks/result) whose
 * JSON holds `expected(i)`: the upstream's real result, for the i-th task.
 */
export async function expectCompleted (session: RawSession, taskIds: readonly string[], expected: (i: number) => string): Promise<void> {
  for (const [i, taskId] of taskIds.entries()) {
    const task = await session.waitFor(taskId, ['completed', 'failed', 'cancelled'])
    expect(task.status, JSON.stringify(task)).toBe('completed')
    expect(JSON.stringify((await session.request('tasks/result', { taskId })).result)).toContain(expected(i))
  }
}

/** Starts two gateway processes on `configFile` (added to `processes`, for the test to stop). */
export async function startPair (configFile: string, processes: GatewayProcess[]): Promise<[GatewayProcess, GatewayProcess]> {
  const started = await Promise.all([startGatewayProcess(configFile), startGatewayProcess(configFile)])
  processes.push(...started)
  return started
}
