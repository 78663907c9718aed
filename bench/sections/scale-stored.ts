// Section "scale", figure "stored tasks": how tasks/get, tasks/list (first page and a middle page), task creation
// and one sweep grow with the tasks a store holds, and what they take in it, at BENCH_SCALE_TASKS sizes per store.
// The gateway runs in the bench process here (the load generator is its own process, as everywhere), so the bench
// fills its store through the store's own API: clones of one real completed task of a 2025-11-25 session (its
// principal, session and outcome), each with a fresh id and its own creation time, a tenth of them already past
// their ttl (what one sweep then removes). Creation is measured through HTTP as a client creates tasks.
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { Redis } from 'ioredis'
import pg from 'pg'
import { pino } from 'pino'
import { parseConfig } from '../../src/config/load.ts'
import { buildGateway, type Gateway } from '../../src/gateway.ts'
import { loggerOptions } from '../../src/observability/logger.ts'
import { encodeTaskCursor } from '../../src/protocol/2025-11-25/task-wire.ts'
import type { TaskRecord } from '../../src/store/types.ts'
import { generate } from '../lib/loadgen.ts'
import { McpHttpSession } from '../lib/mcp-http.ts'
import { track } from '../lib/processes.ts'
import { BENCH_STATE_SECRET } from '../lib/redis.ts'
import { summarize, type LatencySummary } from '../lib/stats.ts'
import { QUICK_TASK, SLOW_TOOL, TASK_TTL_MS, awaitTerminal, createTasks, freshSharedStore, type StoreKind } from '../lib/tasks.ts'
import type { BenchContext } from '../lib/types.ts'

/** Store writes in flight while filling. */
const FILL_BATCH = 512
/** Accounts the filled tasks are spread over. */
const FILL_ACCOUNTS = 64
/** Share of the filled tasks that are already past their ttl. */
const EXPIRED_SHARE = 0.1
/** Task creations through HTTP per size, one at a time (fewer when a window of them runs out). */
const CREATIONS = 100
/** Task ids the tasks/get load goes round (spread over the whole store). */
const GET_IDS = 4096
const DAY_MS = 86_400_000

export interface StoredSizeResult {
  tasks: number
  /** Tasks in the store past their ttl at the time of the sweep (what it removed). */
  expired: number
  get: LatencySummary
  listFirst: LatencySummary
  listMiddle: LatencySummary
  create: LatencySummary
  sweepMs: number
  swept: number
  /** SQLite: file bytes (database and WAL); Redis: MEMORY USAGE of the keys; PostgreSQL: relation sizes; memory: heap the fills added. */
  storeBytes: number | undefined
  fillMs: number
}

let collect: (() => void) | undefined
/** A full GC in the bench process (for the memory store's heap), through V8's gc exposed at run time. */
function fullGc (): void {
  if (collect === undefined) {
    setFlagsFromString('--expose-gc')
    collect = runInNewContext('gc') as () => void
  }
  collect()
  collect()
}

function newId (template: string): string {
  return /^[0-9a-f]+$/.test(template) ? randomBytes(Math.ceil(template.length / 2)).toString('hex').slice(0, template.length) : randomBytes(Math.ceil(template.length * 3 / 4)).toString('base64url').slice(0, template.length)
}

interface InProcessGateway { gateway: Gateway, url: string, storeConfig: Record<string, unknown>, close: () => Promise<void> }

async function startInProcess (ctx: BenchContext, store: StoreKind, dir: string): Promise<InProcessGateway> {
  const shared = store === 'redis' || store === 'postgres' ? freshSharedStore(ctx, store) : undefined
  const storeConfig: Record<string, unknown> = shared?.config ?? (store === 'sqlite' ? { kind: 'sqlite', path: join(dir, 'gateway.db') } : { kind: 'memory' })
  const config = parseConfig({
    server: { host: '127.0.0.1', shutdownGrace: 0, stateSecret: BENCH_STATE_SECRET },
    logging: { level: 'warn' },
    store: storeConfig,
    // The sweep is timed by the bench; the job would otherwise remove the expired tenth on its own.
    tasks: { decide: 'always', sweepInterval: '24h', maxActivePerPrincipal: 1000 },
    limits: { storedBytesPerPrincipal: '4gb' },
    metrics: { enabled: ctx.settings.metrics === 'on' },
    upstreams: [{ name: 'demo', transport: 'streamable-http', url: ctx.upstream.url }],
  }, {}, 'bench configuration')
  const gateway = await buildGateway(config, { logger: pino(loggerOptions(config.logging), pino.destination(2)) })
  const close = track(async () => {
    await gateway.close()
    await shared?.remove()
  })
  const address = await gateway.app.listen({ host: '127.0.0.1', port: 0 })
  await gateway.ready
  return { gateway, url: `${address}${config.server.path}`, storeConfig, close }
}

async function storeBytes (store: StoreKind, storeConfig: Record<string, unknown>): Promise<number | undefined> {
  if (store === 'sqlite') {
    const path = storeConfig.path as string
    const sizes = await Promise.all(['', '-wal'].map((suffix) => stat(path + suffix).then((s) => s.size, () => 0)))
    return sizes.reduce((a, b) => a + b, 0)
  }
  if (store === 'redis') {
    const redis = new Redis(storeConfig.url as string, { lazyConnect: true })
    try {
      await redis.connect()
      let cursor = '0'
      let total = 0
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${storeConfig.prefix as string}*`, 'COUNT', 2000)
        cursor = next
        const pipeline = redis.pipeline()
        for (const key of keys) pipeline.memory('USAGE', key)
        for (const [, bytes] of await pipeline.exec() ?? []) total += Number(bytes ?? 0)
      } while (cursor !== '0')
      return total
    } finally {
      redis.disconnect()
    }
  }
  const client = new pg.Client({ connectionString: storeConfig.url as string })
  await client.connect()
  try {
    const result = await client.query<{ bytes: string | null }>(
      "SELECT sum(pg_total_relation_size(c.oid)) AS bytes FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'",
      [storeConfig.schema])
    return Number(result.rows[0]?.bytes ?? 0)
  } finally {
    await client.end()
  }
}

/** Latencies of `count`-bounded sequential requests, or of `durationMs` of them, from the load generator. */
async function latencies (requests: ReturnType<McpHttpSession['prepare']>[], durationMs: number, expect: string, maxRequests?: number): Promise<LatencySummary> {
  const run = await generate({ requests, concurrency: 1, durationMs, expect, ...(maxRequests !== undefined && { maxRequests }) })
  return summarize(run.latencies)
}

/** The figure for one store: a fresh gateway filled up to each size in turn. */
export async function measureStoredTasks (
  ctx: BenchContext,
  store: StoreKind,
  sizes: readonly number[],
  windowMs: number,
): Promise<StoredSizeResult[]> {
  const dir = await mkdtemp(join(tmpdir(), 'mcp-gw-bench-scale-'))
  const started = await startInProcess(ctx, store, dir)
  const session = await McpHttpSession.open(started.url, 4)
  try {
    const tasks = started.gateway.store.tasks
    // The template: a real task of this session, ended (its outcome stored), read back from the store.
    const [firstId] = await createTasks(session, 1, 1, QUICK_TASK)
    await awaitTerminal(session, [firstId!])
    const template = await tasks.get(firstId!, Date.now())
    if (template === null) throw new Error(`${store}: the template task ${firstId!} is not in the store`)
    // The memory store's bytes: what its fills added to the bench process's heap (after full GCs).
    let heapFilled = 0
    const base = Date.now() - 1000
    const live: TaskRecord[] = []
    let expired = 0
    const results: StoredSizeResult[] = []
    for (const size of sizes) {
      ctx.log(`scale stored ${store}: filling the store up to ${size} live tasks (and a tenth as many past their ttl)`)
      if (store === 'memory') fullGc()
      const heapBefore = process.memoryUsage().heapUsed
      const fillStarted = performance.now()
      const records: TaskRecord[] = []
      for (let i = live.length; i < size; i++) {
        records.push({ ...template, id: newId(template.id), createdAt: base - size + i, lastUpdatedAt: base - size + i, ttlMs: DAY_MS })
      }
      const expiring = Math.round((size - live.length) * EXPIRED_SHARE)
      for (let i = 0; i < expiring; i++) {
        const createdAt = base - 2 * TASK_TTL_MS
        records.push({ ...template, id: newId(template.id), createdAt, lastUpdatedAt: createdAt, ttlMs: TASK_TTL_MS })
      }
      // Each write under one of FILL_ACCOUNTS accounts (the limits' key, not the principal tasks/get and tasks/list go by):
      // PostgreSQL takes an account's creations in turn, and a fill of one account would be that one lock's speed.
      // PostgreSQL's pool (store.poolSize, 10) hands a connection to a waiting write within store.acquireTimeout (5 s) only.
      const batch = store === 'postgres' ? 32 : FILL_BATCH
      for (let i = 0; i < records.length; i += batch) {
        await Promise.all(records.slice(i, i + batch).map((r, n) => tasks.create(r, { account: `scale-fill-${n % FILL_ACCOUNTS}` })))
      }
      const fillMs = performance.now() - fillStarted
      if (store === 'memory') {
        fullGc()
        heapFilled += process.memoryUsage().heapUsed - heapBefore
      }
      live.push(...records.slice(0, records.length - expiring))
      expired += expiring
      // Live tasks in list order: by createdAt, then id (the fill gave each its own createdAt, oldest first).
      live.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1))

      const getRequests = Array.from({ length: GET_IDS }, (_, i) => session.prepare('tasks/get', { taskId: live[Math.floor(i * live.length / GET_IDS)]!.id }))
      const middle = live[Math.floor(live.length / 2)]!
      ctx.log(`scale stored ${store} ${size}: tasks/get, tasks/list (first and middle page), ${CREATIONS} creations, a sweep`)
      const get = await latencies(getRequests, windowMs, '"status":"completed"')
      const listFirst = await latencies([session.prepare('tasks/list', {})], windowMs, '"tasks"')
      const listMiddle = await latencies([session.prepare('tasks/list', { cursor: encodeTaskCursor(middle.createdAt, middle.id) })], windowMs, '"tasks"')
      const create = await latencies([session.prepare('tools/call', { name: SLOW_TOOL, arguments: QUICK_TASK, task: { ttl: TASK_TTL_MS } })], 4 * windowMs,
        '"status":"working"', CREATIONS)
      const bytes = store === 'memory' ? heapFilled : await storeBytes(store, started.storeConfig)
      const sweepStarted = performance.now()
      const swept = await tasks.sweep(Date.now())
      const sweepMs = performance.now() - sweepStarted
      ctx.log(`scale stored ${store} ${size}: filled in ${(fillMs / 1000).toFixed(1)} s, measured in ${((performance.now() - fillStarted - fillMs) / 1000).toFixed(1)} s`)
      results.push({ tasks: size, expired, get, listFirst, listMiddle, create, sweepMs, swept, storeBytes: bytes, fillMs })
      expired = 0
    }
    return results
  } finally {
    // The gateway first: ending the session would cancel its principal's tasks, a walk over the whole store.
    await started.close()
    await session.close()
    await rm(dir, { recursive: true, force: true })
  }
}
