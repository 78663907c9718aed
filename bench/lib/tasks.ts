// Shared by the task sections (bench/sections/task-*.ts): gateways configured for thousands of tasks,
// creating tasks that stay in flight, measured windows with the gateway's own stats, CPU profiles of
// those windows, and the gateways (memory, sqlite and, when their servers answer, redis and postgres store) that
// task-create sets up with BENCH_TASKS_IN_FLIGHT tasks in flight and task-get reuses.
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import type { GatewayHandle, ProbeStats } from './gateway.ts'
import type { LoadRun } from './load.ts'
import { McpHttpSession, type TaskClient } from './mcp-http.ts'
import { ModernHttpClient } from './modern-http.ts'
import { procCpuMs } from './processes.ts'
import { freshPostgresStore, postgresReachable, type PostgresStoreConfig } from './postgres.ts'
import { BENCH_STATE_SECRET, freshRedisStore, printableUrl, redisReachable, type RedisStoreConfig } from './redis.ts'
import type { BenchContext } from './types.ts'

export type StoreKind = 'memory' | 'sqlite' | 'redis' | 'postgres'
/** The stores design.md §4 states its budgets for. */
export const STORES: readonly StoreKind[] = ['memory', 'sqlite']
/** The stores several gateway processes share, measured when their servers answer. */
export type SharedStoreKind = 'redis' | 'postgres'
export const SHARED_STORES: readonly SharedStoreKind[] = ['redis', 'postgres']

/** Whether the server of a shared store answers (asked once per run). */
export async function sharedStoreReachable (ctx: BenchContext, store: SharedStoreKind): Promise<boolean> {
  return store === 'redis' ? await redisReachable(ctx.settings.redisUrl) : await postgresReachable(ctx.settings.postgresUrl)
}

/**
 * The stores the task sections measure: the budget stores, and redis and postgres when their servers answer
 * (numbers only, no budget), or those BENCH_STORES names.
 */
export async function measuredStores (ctx: BenchContext): Promise<StoreKind[]> {
  if (ctx.settings.stores !== undefined) return ctx.settings.stores
  const shared = await Promise.all(SHARED_STORES.map(async (store) => await sharedStoreReachable(ctx, store) ? [store] : []))
  return [...STORES, ...shared.flat()]
}

/** The notes a section prints for the shared stores it did not measure because their server did not answer. */
export function skippedStoreNotes (ctx: BenchContext, measured: readonly StoreKind[]): string[] {
  if (ctx.settings.stores !== undefined) return []
  return SHARED_STORES.filter((store) => !measured.includes(store)).map((store) => store === 'redis'
    ? `redis store not measured: no Redis answered at ${printableUrl(ctx.settings.redisUrl)} (set BENCH_REDIS_URL)`
    : `postgres store not measured: no PostgreSQL answered at ${printableUrl(ctx.settings.postgresUrl)} (set BENCH_POSTGRES_URL)`)
}

export interface SharedStorePlace {
  /** The gateways' `store` section. */
  config: RedisStoreConfig | PostgresStoreConfig
  /** Removes what they stored (once; call it after they have closed). */
  remove: () => Promise<void>
}

/** A fresh place in a shared store for one gateway or a group of them, and its removal once they have closed. */
export function freshSharedStore (ctx: BenchContext, store: SharedStoreKind): SharedStorePlace {
  if (store === 'redis') {
    const redis = freshRedisStore(ctx.settings.redisUrl)
    return { config: redis.config, remove: redis.purge }
  }
  const postgres = freshPostgresStore(ctx.settings.postgresUrl)
  return { config: postgres.config, remove: postgres.drop }
}

export const LOOP_STALL_LIMIT_MS = 50
/** The demo upstream's slow tool through the gateway. */
export const SLOW_TOOL = 'demo__slow'
/** Arguments of a task that outlives any bench run: it stays `working` (in flight) until its gateway closes. */
export const LONG_TASK = { duration: 3_600_000, steps: 1 }
/** Arguments of a task that ends at once (warm-up of the whole task path, runner and upstream call included). */
export const QUICK_TASK = { duration: 0, steps: 1 }
/** The ttl the bench asks for (1 h: nothing expires during a run). */
export const TASK_TTL_MS = 3_600_000
/** Sequential creations before any measured creation (JIT, first upstream connections, sqlite cache). */
export const CREATE_WARMUP = 200

/** Splits `total` into `parts` near-equal positive integers. */
export function split (total: number, parts: number): number[] {
  return Array.from({ length: parts }, (_, i) => Math.floor(total * (i + 1) / parts) - Math.floor(total * i / parts)).filter((n) => n > 0)
}

export function mib (bytes: number): string {
  return (bytes / 1048576).toFixed(1)
}

export function us (value: number | undefined): string {
  return value === undefined || Number.isNaN(value) ? '—' : value.toFixed(0)
}

export interface TaskGatewayLimits {
  /** Tasks one principal (here: one session) may have in flight, and calls that may queue for an upstream connection. */
  maxTasks: number
}

/**
 * A gateway whose limits admit `maxTasks` tasks in flight on one session, and as many for the 2026-07-28
 * clients (one anonymous principal with auth off): maxActivePerPrincipal (twice `maxTasks`: with auth off it
 * binds the client address, which the session and the 2026-07-28 clients share) and the upstream's maxQueuedCalls
 * are raised (maxConcurrentCalls keeps its default, so all but a few tasks wait in the upstream pool's queue);
 * a 2026-07-28 call that declares the tasks extension is a task at once (`tasks.decide: always`), and the
 * shutdown grace is zero so closing it does not wait for tasks that run for an hour. `auth`: the auth section
 * (default off).
 */
export async function startTaskGateway (
  ctx: BenchContext,
  store: StoreKind | RedisStoreConfig | PostgresStoreConfig,
  limits: TaskGatewayLimits,
  auth?: Record<string, unknown>,
): Promise<GatewayHandle> {
  if (store === 'redis' || store === 'postgres') {
    // A fresh key prefix or schema, removed once this gateway has closed.
    const shared = freshSharedStore(ctx, store)
    const gateway = await startTaskGateway(ctx, shared.config, limits, auth)
    return { ...gateway, close: async () => { await gateway.close(); await shared.remove() } }
  }
  return await ctx.startGateway({
    store,
    ...(auth !== undefined && { auth }),
    tasks: { maxActivePerPrincipal: 2 * limits.maxTasks, decide: 'always' },
    upstream: { maxQueuedCalls: 2 * limits.maxTasks },
    // With a shared store the processes sign their messages to each other with a key derived from it.
    server: { shutdownGrace: 0, stateSecret: BENCH_STATE_SECRET },
  })
}

/** Creates `count` tasks of `args` on `session` with `workers` requests at a time; returns their ids. */
export async function createTasks (
  session: TaskClient,
  count: number,
  workers: number,
  args: Record<string, unknown> = LONG_TASK,
): Promise<string[]> {
  const ids: string[] = []
  let started = 0
  const worker = async (): Promise<void> => {
    while (started < count) {
      started++
      ids.push(await session.createTask(SLOW_TOOL, args, TASK_TTL_MS))
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, Math.min(workers, count)) }, worker))
  return ids
}

/** Polls `tasks/get` until every task has left `working`; throws after `timeoutMs`. */
export async function awaitTerminal (session: TaskClient, ids: readonly string[], timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let open = [...ids]
  while (open.length > 0) {
    const statuses = await Promise.all(open.map((id) => session.getTask(id)))
    open = open.filter((_, i) => statuses[i] === 'working' || statuses[i] === 'input_required')
    if (open.length === 0) return
    if (Date.now() > deadline) throw new Error(`${open.length} warm-up tasks still running after ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** One measured window: the client's load run, the gateway's own stats and the upstream's CPU. */
export interface Window {
  run: LoadRun
  gateway: ProbeStats | undefined
  upstreamCpuMs: number | undefined
}

export async function measureWindow (ctx: BenchContext, gateway: GatewayHandle, driver: () => Promise<LoadRun>): Promise<Window> {
  await gateway.resetStats()
  const before = procCpuMs(ctx.upstream.pid)
  const run = await driver()
  const after = procCpuMs(ctx.upstream.pid)
  const stats = await gateway.readStats()
  return { run, gateway: stats, upstreamCpuMs: before === undefined || after === undefined ? undefined : after - before }
}

/** Totals of several windows of one kind of measurement. */
export interface WindowTotals {
  calls: number
  elapsedMs: number
  latencies: Float64Array[]
  clientCpuMs: number
  clientMaxLoopDelayMs: number
  gatewayCpuMs: number | undefined
  gatewayMaxLoopDelayMs: number | undefined
  upstreamCpuMs: number | undefined
}

export function totalsOf (windows: readonly Window[]): WindowTotals {
  const sum = (values: Array<number | undefined>): number | undefined =>
    values.some((v) => v === undefined) ? undefined : values.reduce<number>((a, b) => a + b!, 0)
  const max = (values: Array<number | undefined>): number | undefined =>
    values.some((v) => v === undefined) ? undefined : Math.max(...values as number[])
  return {
    calls: windows.reduce((n, w) => n + w.run.calls, 0),
    elapsedMs: windows.reduce((n, w) => n + w.run.elapsedMs, 0),
    latencies: windows.map((w) => w.run.latencies),
    clientCpuMs: windows.reduce((n, w) => n + w.run.clientCpuMs, 0),
    clientMaxLoopDelayMs: Math.max(...windows.map((w) => w.run.clientMaxLoopDelayMs)),
    gatewayCpuMs: sum(windows.map((w) => w.gateway?.cpuMs)),
    gatewayMaxLoopDelayMs: max(windows.map((w) => w.gateway?.maxLoopDelayMs)),
    upstreamCpuMs: sum(windows.map((w) => w.upstreamCpuMs)),
  }
}

/** CPU µs per call of a total, or undefined. */
export function perCallUs (cpuMs: number | undefined, calls: number): number | undefined {
  return cpuMs === undefined || calls === 0 ? undefined : cpuMs * 1000 / calls
}

/**
 * Runs `body` under a V8 CPU profile of `gateway` when BENCH_PROFILE_DIR is set, and records the file
 * in `profiles`; otherwise just runs it.
 */
export async function profiled (
  ctx: BenchContext,
  gateway: GatewayHandle,
  name: string,
  profiles: string[],
  body: () => Promise<void>,
): Promise<void> {
  const dir = ctx.settings.profileDir
  if (dir === undefined || !gateway.canProfile) return await body()
  await mkdir(dir, { recursive: true })
  const file = join(dir, `${name}.cpuprofile`)
  await gateway.startProfile()
  try {
    await body()
  } finally {
    await gateway.stopProfile(file)
  }
  profiles.push(file)
}

/** The notes every task section prints about its profiles. */
export function profileNotes (profiles: readonly string[]): string[] {
  return profiles.map((file) => `gateway CPU profile (numbers above are perturbed by profiling): ${file} — summarise with: npx tsx bench/tools/cpuprofile-top.ts ${file}`)
}

// ── the gateways shared by task-create and task-get ──────────────────────────────────────────────────

export interface SharedTaskGateway {
  store: StoreKind
  gateway: GatewayHandle
  /** The one session (and so the one principal) every task of this gateway belongs to. */
  session: McpHttpSession
  /** Ids of the tasks created so far on `session`, all still in flight. */
  ids: string[]
  /** Tasks put in flight before anything was measured. */
  seeded: number
  /** A 2026-07-28 client of the same gateway (no session: every request carries its envelope), with the tasks extension. */
  modern: ModernHttpClient
  /** Ids of the tasks `modern` created so far, all still in flight. */
  modernIds: string[]
}

/** Connections of the shared sessions: enough for the 64 workers of task-get and the default concurrency. */
function sharedConnections (ctx: BenchContext): number {
  return Math.max(64, ctx.settings.concurrency)
}

const shared = new Map<StoreKind, Promise<SharedTaskGateway>>()

/**
 * The gateway with this store that the task sections share, started on first use with
 * BENCH_TASKS_IN_FLIGHT long-running tasks already in flight on its one session.
 */
export function sharedTaskGateway (ctx: BenchContext, store: StoreKind): Promise<SharedTaskGateway> {
  let entry = shared.get(store)
  if (entry === undefined) {
    entry = (async () => {
      const { settings } = ctx
      // Room for the seeded tasks, task-create's warm-up and measured creations, and some slack.
      const maxTasks = settings.tasksInFlight + CREATE_WARMUP + settings.taskCreates + 1000
      ctx.log(`starting a gateway with the ${store} store for the task sections (up to ${maxTasks} tasks in flight)`)
      const gateway = await startTaskGateway(ctx, store, { maxTasks })
      const session = await McpHttpSession.open(gateway.url, sharedConnections(ctx))
      ctx.log(`${store}: putting ${settings.tasksInFlight} long-running ${SLOW_TOOL} tasks in flight`)
      const ids = await createTasks(session, settings.tasksInFlight, 16)
      const modern = new ModernHttpClient(gateway.url, sharedConnections(ctx), { tasks: true })
      return { store, gateway, session, ids, seeded: ids.length, modern, modernIds: [] }
    })()
    shared.set(store, entry)
  }
  return entry
}

/** Closes the shared gateways (their tasks are cancelled by the shutdown), so later sections run on a quieter machine. */
export async function closeSharedTaskGateways (): Promise<void> {
  const entries = [...shared.values()]
  shared.clear()
  await Promise.all(entries.map(async (entry) => {
    const g = await entry.catch(() => undefined)
    if (!g) return
    await g.session.close()
    await g.modern.close()
    await g.gateway.close()
  }))
}
