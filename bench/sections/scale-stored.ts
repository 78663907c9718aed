// Section "scale", figure "stored tasks": how tasks/get, tasks/list (first page and a middle page), task creation
// and one sweep grow with the tasks a store holds, and what they take in it, at BENCH_SCALE_TASKS sizes per store.
// The gateway runs in the bench process here (the load generator is its own process, as everywhere), so the bench
// fills its store through the store's own API: clones of one real completed task of a 2025-11-25 session (its
// principal, session and outcome), each with a fresh id and its own creation time, a tenth of them already past
// their ttl (what one sweep then removes). Creation is measured through HTTP as a client creates tasks.
import { randomBytes } from 'node:crypto'
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises'
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
import { PostgresStore } from '../../src/store/postgres/postgres-store.ts'
import type { GatewayStore, TaskRecord } from '../../src/store/types.ts'
import { generate } from '../lib/loadgen.ts'
import { McpHttpSession } from '../lib/mcp-http.ts'
import { track } from '../lib/processes.ts'
import { BENCH_STATE_SECRET } from '../lib/redis.ts'
import { summarize, type LatencySummary } from '../lib/stats.ts'
import { QUICK_TASK, SLOW_TOOL, TASK_TTL_MS, awaitTerminal, createTasks, freshSharedStore, type StoreKind } from '../lib/tasks.ts'
import type { BenchContext } from '../lib/types.ts'

/** Store writes in flight while filling. */
const FILL_BATCH = 512
/** Connections of the store PostgreSQL's fills write through. */
const FILL_POOL = 16
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

/** One store's gateway, filled in turn up to each size and measured there. */
class StoredFigure {
  readonly store: StoreKind
  readonly #ctx: BenchContext
  readonly #started: InProcessGateway
  readonly #session: McpHttpSession
  readonly #template: TaskRecord
  readonly #base = Date.now() - 1000
  /** Live tasks in list order: by createdAt, then id (the fill gives each its own createdAt, oldest first). */
  readonly #live: TaskRecord[] = []
  /** Tasks past their ttl added by the last fill (what the next sweep removes). */
  #expired = 0
  /** The memory store's bytes: what its fills added to the bench process's heap (after full GCs). */
  #heapFilled = 0
  #fillMs = 0
  /** The store the fills write through: the gateway's own, or for PostgreSQL one more store on its schema (see open). */
  readonly #filler: GatewayStore

  private constructor (
    ctx: BenchContext, store: StoreKind, started: InProcessGateway, session: McpHttpSession, template: TaskRecord, filler: GatewayStore,
  ) {
    this.#ctx = ctx
    this.#filler = filler
    this.store = store
    this.#started = started
    this.#session = session
    this.#template = template
  }

  static async open (ctx: BenchContext, store: StoreKind, dir: string): Promise<StoredFigure> {
    const started = await startInProcess(ctx, store, join(dir, store))
    const session = await McpHttpSession.open(started.url, 4)
    try {
      // The template: a real task of this session, ended (its outcome stored), read back from the store.
      const [firstId] = await createTasks(session, 1, 1, QUICK_TASK)
      await awaitTerminal(session, [firstId!])
      const template = await started.gateway.store.tasks.get(firstId!, Date.now())
      if (template === null) throw new Error(`${store}: the template task ${firstId!} is not in the store`)
      // PostgreSQL commits each creation on its own (one WAL flush each): the fills write through a store of their
      // own on the same schema with a pool large enough for many commits to share a flush. The gateway's store, and
      // what is measured, keep their settings.
      let filler: GatewayStore = started.gateway.store
      if (store === 'postgres') {
        const { url, schema } = started.storeConfig as { url: string, schema: string }
        filler = new PostgresStore({ url, schema, poolSize: FILL_POOL, acquireTimeout: 60_000 })
        await (filler as PostgresStore).ready()
      }
      return new StoredFigure(ctx, store, started, session, template, filler)
    } catch (err) {
      await started.close()
      await session.close()
      throw err
    }
  }

  /** Fills the store up to `size` live tasks, and a tenth as many of the new ones past their ttl. */
  async fill (size: number): Promise<void> {
    const { store } = this
    const tasks = this.#filler.tasks
    const template = this.#template
    this.#ctx.log(`scale stored ${store}: filling the store up to ${size} live tasks (and a tenth as many past their ttl)`)
    if (store === 'memory') fullGc()
    const heapBefore = process.memoryUsage().heapUsed
    const fillStarted = performance.now()
    const records: TaskRecord[] = []
    const base = this.#base
    for (let i = this.#live.length; i < size; i++) {
      records.push({ ...template, id: newId(template.id), createdAt: base - size + i, lastUpdatedAt: base - size + i, ttlMs: DAY_MS })
    }
    const expiring = Math.round((size - this.#live.length) * EXPIRED_SHARE)
    for (let i = 0; i < expiring; i++) {
      const createdAt = base - 2 * TASK_TTL_MS
      records.push({ ...template, id: newId(template.id), createdAt, lastUpdatedAt: createdAt, ttlMs: TASK_TTL_MS })
    }
    // Each write under one of FILL_ACCOUNTS accounts (the limits' key, not the principal tasks/get and tasks/list go by):
    // PostgreSQL takes an account's creations in turn, and a fill of one account would be that one lock's speed.
    const batch = store === 'postgres' ? 4 * FILL_POOL : FILL_BATCH
    for (let i = 0; i < records.length; i += batch) {
      await Promise.all(records.slice(i, i + batch).map((r, n) => tasks.create(r, { account: `scale-fill-${n % FILL_ACCOUNTS}` })))
    }
    this.#fillMs = performance.now() - fillStarted
    if (store === 'memory') {
      fullGc()
      this.#heapFilled += process.memoryUsage().heapUsed - heapBefore
    }
    this.#live.push(...records.slice(0, records.length - expiring))
    this.#expired = expiring
    this.#live.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1))
  }

  /** The figures at the size the last fill reached. */
  async measure (size: number, windowMs: number): Promise<StoredSizeResult> {
    const { store } = this
    const session = this.#session
    const tasks = this.#started.gateway.store.tasks
    const live = this.#live
    const started = performance.now()
    const getRequests = Array.from({ length: GET_IDS }, (_, i) => session.prepare('tasks/get', { taskId: live[Math.floor(i * live.length / GET_IDS)]!.id }))
    const middle = live[Math.floor(live.length / 2)]!
    this.#ctx.log(`scale stored ${store} ${size}: tasks/get, tasks/list (first and middle page), ${CREATIONS} creations, a sweep`)
    const get = await latencies(getRequests, windowMs, '"status":"completed"')
    const listFirst = await latencies([session.prepare('tasks/list', {})], windowMs, '"tasks"')
    const listMiddle = await latencies([session.prepare('tasks/list', { cursor: encodeTaskCursor(middle.createdAt, middle.id) })], windowMs, '"tasks"')
    const create = await latencies([session.prepare('tools/call', { name: SLOW_TOOL, arguments: QUICK_TASK, task: { ttl: TASK_TTL_MS } })], 4 * windowMs,
      '"status":"working"', CREATIONS)
    const bytes = store === 'memory' ? this.#heapFilled : await storeBytes(store, this.#started.storeConfig)
    const sweepStarted = performance.now()
    const swept = await tasks.sweep(Date.now())
    const sweepMs = performance.now() - sweepStarted
    this.#ctx.log(`scale stored ${store} ${size}: filled in ${(this.#fillMs / 1000).toFixed(1)} s, measured in ${((performance.now() - started) / 1000).toFixed(1)} s`)
    const result = {
      tasks: size, expired: this.#expired, get, listFirst, listMiddle, create, sweepMs, swept, storeBytes: bytes, fillMs: this.#fillMs,
    }
    this.#expired = 0
    return result
  }

  async close (): Promise<void> {
    // The gateway first: ending the session would cancel its principal's tasks, a walk over the whole store.
    if (this.#filler !== this.#started.gateway.store) await this.#filler.close()
    await this.#started.close()
    await this.#session.close()
  }
}

/**
 * The figure for every store: a gateway each (in the bench process), grown through the sizes together. At each
 * size the memory store is filled alone (its size is the heap its fill adds), then the others at once (a fill's
 * work is in the bench process for SQLite, in Redis and PostgreSQL for theirs, so those fills overlap), then every
 * store is measured, one after the other, with nothing else running.
 * A store that fails is left out from then on, with its error in `failures`.
 */
export async function measureStoredTasks (
  ctx: BenchContext,
  stores: readonly StoreKind[],
  sizes: readonly number[],
  windowMs: number,
): Promise<{ byStore: Record<string, StoredSizeResult[]>, failures: Record<string, string> }> {
  const dir = await mkdtemp(join(tmpdir(), 'mcp-gw-bench-scale-'))
  const byStore: Record<string, StoredSizeResult[]> = {}
  const failures: Record<string, string> = {}
  const figures: StoredFigure[] = []
  const failed = (store: string, err: unknown): void => {
    failures[store] = err instanceof Error ? err.message : String(err)
  }
  try {
    for (const store of stores) {
      await mkdir(join(dir, store))
      try {
        figures.push(await StoredFigure.open(ctx, store, dir))
      } catch (err) {
        failed(store, err)
      }
    }
    for (const size of sizes) {
      const fill = async (figure: StoredFigure): Promise<void> => {
        if (failures[figure.store] !== undefined) return
        try {
          await figure.fill(size)
        } catch (err) {
          failed(figure.store, err)
        }
      }
      // The memory store alone: its size is what its fill adds to the bench process's heap.
      for (const figure of figures.filter((f) => f.store === 'memory')) await fill(figure)
      await Promise.all(figures.filter((f) => f.store !== 'memory').map(fill))
      for (const figure of figures) {
        if (failures[figure.store] !== undefined) continue
        try {
          (byStore[figure.store] ??= []).push(await figure.measure(size, windowMs))
        } catch (err) {
          failed(figure.store, err)
        }
      }
    }
    return { byStore, failures }
  } finally {
    for (const figure of figures) await figure.close().catch(() => {})
    await rm(dir, { recursive: true, force: true })
  }
}
