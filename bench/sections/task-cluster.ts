// Section "task-cluster": each shared store on three gateway processes sharing it: one Redis key prefix, then
// one PostgreSQL schema (fresh ones, removed afterwards). The bench client spreads its requests round robin over the three
// processes' URLs (each request straight to the next process, no balancer), all on one legacy session:
// the store holds it, so every process serves it. BENCH_TASKS_IN_FLIGHT long-running tasks are put in
// flight first (each process runs the ones it created), then BENCH_TASK_CREATES creations at concurrency
// 1 are measured while more than that many are in flight, each round followed by as many tasks/get at
// concurrency 1 (the round-trip floor of the same run), then tasks/get with BENCH_CONCURRENCY workers for
// BENCH_SECONDS from the load generator (its own process, bench/lib/loadgen.ts), against its floor: three bare
// Fastify routes (bench/lib/floors.ts) answering the cluster's own tasks/get answer, the same requests round
// robin over them, measured before each round and after the last.
// Budgets (design.md §4, as for one process): tasks/get ≥ 70 % of the floor's requests/s; creation p99 ≤ 2 ×
// the same run's tasks/get p99, and ≤ 2 ms; no event-loop stall over 50 ms in any process.
// A store is skipped when its server does not answer (BENCH_REDIS_URL, BENCH_POSTGRES_URL). The tables and
// checks are task-cluster-report.ts's.
import { startFastifyFloor, type FloorHandle } from '../lib/floors.ts'
import type { GatewayHandle, ProbeStats } from '../lib/gateway.ts'
import { sequential, type LoadRun } from '../lib/load.ts'
import { generate, type PreparedRequest } from '../lib/loadgen.ts'
import { McpHttpSession, type TaskClient } from '../lib/mcp-http.ts'
import { procCpuMs } from '../lib/processes.ts'
import { postgresCpuMs } from '../lib/postgres.ts'
import { BENCH_STATE_SECRET, redisCpuMs } from '../lib/redis.ts'
import { concat, summarize } from '../lib/stats.ts'
import {
  CREATE_WARMUP, LONG_TASK, SHARED_STORES, SLOW_TOOL, TASK_TTL_MS, closeSharedTaskGateways, createTasks, freshSharedStore, measuredStores,
  skippedStoreNotes, split, type SharedStoreKind,
} from '../lib/tasks.ts'
import type { BenchContext, Section, SectionResult } from '../lib/types.ts'
import { PROCESSES, report, SERVER_NAME, type FloorTotals, type Totals } from './task-cluster-report.ts'

const WARMUP_MS = 1000
/** Pre-built tasks/get requests at least (distinct JSON-RPC ids: none is reused while an earlier use may be in flight). */
const PREPARED = 4096
const EXPECT = '"status":"working"'

/** One session through several gateway processes: each request goes to the next one in turn. */
class RoundRobin implements TaskClient {
  readonly views: McpHttpSession[]
  /** Requests sent to each process since the last reset. */
  served: number[]
  #next = 0

  constructor (views: McpHttpSession[]) {
    this.views = views
    this.served = views.map(() => 0)
  }

  #pick (): McpHttpSession {
    const i = this.#next++ % this.views.length
    this.served[i]!++
    return this.views[i]!
  }

  async createTask (tool: string, args: Record<string, unknown>, ttlMs: number): Promise<string> {
    return await this.#pick().createTask(tool, args, ttlMs)
  }

  async getTask (taskId: string): Promise<string> {
    return await this.#pick().getTask(taskId)
  }

  reset (): void {
    this.served = this.views.map(() => 0)
  }
}

/** One measured window over every process: the client's run, each gateway's own stats, the upstream's and the store server's CPU. */
interface ClusterWindow {
  run: LoadRun
  gateways: Array<ProbeStats | undefined>
  served: number[]
  upstreamCpuMs: number | undefined
  serverCpuMs: number | undefined
}

/** CPU time the store's server has used so far (ms; undefined when it cannot be read). */
async function serverCpuMs (ctx: BenchContext, store: SharedStoreKind): Promise<number | undefined> {
  return store === 'redis' ? await redisCpuMs(ctx.settings.redisUrl) : postgresCpuMs()
}

async function measure (
  ctx: BenchContext,
  store: SharedStoreKind,
  gateways: GatewayHandle[],
  rr: RoundRobin,
  driver: () => Promise<LoadRun>,
): Promise<ClusterWindow> {
  await Promise.all(gateways.map((g) => g.resetStats()))
  rr.reset()
  const upstreamBefore = procCpuMs(ctx.upstream.pid)
  const serverBefore = await serverCpuMs(ctx, store)
  const run = await driver()
  const upstreamAfter = procCpuMs(ctx.upstream.pid)
  const serverAfter = await serverCpuMs(ctx, store)
  const delta = (a: number | undefined, b: number | undefined): number | undefined => a === undefined || b === undefined ? undefined : b - a
  return {
    run,
    gateways: await Promise.all(gateways.map((g) => g.readStats())),
    // The load generator sends its pre-built requests round robin over the processes: a third each.
    served: rr.served.some((n) => n > 0) ? [...rr.served] : rr.served.map((_, i) => Math.ceil((run.calls - i) / PROCESSES)),
    upstreamCpuMs: delta(upstreamBefore, upstreamAfter),
    serverCpuMs: delta(serverBefore, serverAfter),
  }
}

function totals (windows: readonly ClusterWindow[]): Totals {
  const sum = (values: Array<number | undefined>): number | undefined =>
    values.some((v) => v === undefined) ? undefined : values.reduce<number>((a, b) => a + b!, 0)
  const calls = windows.reduce((n, w) => n + w.run.calls, 0)
  const elapsedMs = windows.reduce((n, w) => n + w.run.elapsedMs, 0)
  return {
    calls,
    elapsedMs,
    latency: summarize(concat(windows.map((w) => w.run.latencies))),
    perSecond: calls / (elapsedMs / 1000),
    clientCpuMs: windows.reduce((n, w) => n + w.run.clientCpuMs, 0),
    processes: Array.from({ length: PROCESSES }, (_, i) => ({
      served: windows.reduce((n, w) => n + (w.served[i] ?? 0), 0),
      cpuMs: sum(windows.map((w) => w.gateways[i]?.cpuMs)),
      maxLoopDelayMs: windows.some((w) => w.gateways[i] === undefined)
        ? undefined
        : Math.max(...windows.map((w) => w.gateways[i]!.maxLoopDelayMs)),
    })),
    upstreamCpuMs: sum(windows.map((w) => w.upstreamCpuMs)),
    serverCpuMs: sum(windows.map((w) => w.serverCpuMs)),
  }
}

async function run (ctx: BenchContext): Promise<SectionResult> {
  const measured = await measuredStores(ctx)
  const stores = SHARED_STORES.filter((store) => measured.includes(store))
  const skipped = skippedStoreNotes(ctx, measured)
  if (stores.length === 0) return { tables: [], checks: [], notes: skipped, data: { skipped: true } }
  // The single-process task gateways (thousands of tasks) would otherwise still be running.
  await closeSharedTaskGateways()
  const results: Partial<Record<SharedStoreKind, SectionResult>> = {}
  for (const store of stores) results[store] = await runOn(ctx, store)
  const all = Object.values(results)
  return {
    tables: all.flatMap((r) => r.tables),
    checks: all.flatMap((r) => r.checks),
    notes: [...all.flatMap((r) => r.notes), ...skipped],
    data: Object.fromEntries(Object.entries(results).map(([store, r]) => [store, r.data])),
  }
}

async function runOn (ctx: BenchContext, store: SharedStoreKind): Promise<SectionResult> {
  const { settings } = ctx
  const maxTasks = settings.tasksInFlight + CREATE_WARMUP + settings.taskCreates + 1000
  const shared = freshSharedStore(ctx, store)
  ctx.log(`task-cluster: starting ${PROCESSES} gateways on one ${SERVER_NAME[store]} (up to ${maxTasks} tasks in flight)`)
  const gateways = await Promise.all(Array.from({ length: PROCESSES }, () => ctx.startGateway({
    store: shared.config,
    tasks: { maxActivePerPrincipal: maxTasks },
    upstream: { maxQueuedCalls: maxTasks },
    server: { shutdownGrace: 0, stateSecret: BENCH_STATE_SECRET },
  })))
  const connections = Math.max(64, settings.concurrency)
  let first: McpHttpSession | undefined
  const views: McpHttpSession[] = []
  const floors: FloorHandle[] = []
  try {
    first = await McpHttpSession.open(gateways[0]!.url, connections)
    views.push(first, ...gateways.slice(1).map((g) => McpHttpSession.attach(g.url, first!.sessionId, connections)))
    const rr = new RoundRobin(views)
    ctx.log(`task-cluster: putting ${settings.tasksInFlight} long-running ${SLOW_TOOL} tasks in flight, round robin over the processes`)
    const ids = await createTasks(rr, settings.tasksInFlight, 16)
    const create = async (): Promise<void> => { ids.push(await rr.createTask(SLOW_TOOL, LONG_TASK, TASK_TTL_MS)) }
    let nextId = 0
    const get = async (): Promise<void> => {
      const id = ids[nextId++ % ids.length]!
      const status = await rr.getTask(id)
      if (status !== 'working') throw new Error(`tasks/get ${id}: ${status}, expected working`)
    }

    ctx.log(`task-cluster warm-up: ${CREATE_WARMUP} sequential creations and tasks/get`)
    await sequential(create, CREATE_WARMUP)
    await sequential(get, CREATE_WARMUP)
    const creates: ClusterWindow[] = []
    const getsC1: ClusterWindow[] = []
    const inFlight: Array<[number, number]> = []
    for (const [round, count] of split(settings.taskCreates, settings.rounds).entries()) {
      ctx.log(`task-cluster create round ${round + 1}: ${count} sequential creations, then as many tasks/get, ${ids.length} tasks in flight`)
      const before = ids.length
      creates.push(await measure(ctx, store, gateways, rr, () => sequential(create, count)))
      inFlight.push([before, ids.length])
      getsC1.push(await measure(ctx, store, gateways, rr, () => sequential(get, count)))
    }

    // tasks/get under load, from the load generator, against three bare Fastify routes answering the cluster's answer.
    const template = await first.answerOf('tasks/get', { taskId: ids[0]! })
    ctx.log(`task-cluster: starting the floor, ${PROCESSES} bare Fastify routes answering the cluster's tasks/get answer`)
    floors.push(...await Promise.all(views.map(() => startFastifyFloor(template))))
    const prepared: PreparedRequest[] = Array.from({ length: Math.max(PREPARED, ids.length) },
      (_, i) => views[i % PROCESSES]!.prepare('tasks/get', { taskId: ids[i % ids.length]! }))
    const floorOf = new Map(views.map((view, i) => [view.url.origin, new URL(floors[i]!.url).origin]))
    const floorRequests = prepared.map((r) => ({ ...r, origin: floorOf.get(r.origin)! }))
    const load = (list: PreparedRequest[], durationMs: number) => () =>
      generate({ requests: list, concurrency: settings.concurrency, durationMs, expect: EXPECT })
    ctx.log(`task-cluster tasks/get warm-up: ${settings.concurrency} workers for ${WARMUP_MS / 1000} s, floor and cluster`)
    await load(floorRequests, WARMUP_MS)()
    await load(prepared, WARMUP_MS)()
    const gets: ClusterWindow[] = []
    const floorWindows: FloorWindow[] = []
    const slice = settings.seconds * 1000 / settings.rounds
    const measureFloor = async (label: string): Promise<void> => {
      ctx.log(`task-cluster tasks/get ${label}: ${settings.concurrency} workers for ${(slice / 1000).toFixed(1)} s, floor`)
      const before = floors.map((f) => f.cpuMs())
      const run = await load(floorRequests, slice)()
      const after = floors.map((f) => f.cpuMs())
      const used = after.map((a, i) => a === undefined || before[i] === undefined ? Number.NaN : a - before[i]!)
      floorWindows.push({ run, cpuMs: used.reduce((n, v) => n + v, 0) })
    }
    for (let round = 0; round < settings.rounds; round++) {
      await measureFloor(`round ${round + 1}/${settings.rounds}`)
      ctx.log(`task-cluster tasks/get round ${round + 1}/${settings.rounds}: ${settings.concurrency} workers for ${(slice / 1000).toFixed(1)} s, ${ids.length} task ids`)
      gets.push(await measure(ctx, store, gateways, rr, load(prepared, slice)))
    }
    await measureFloor('closing floor window')
    // The tasks really are in flight: the first seeded one and the last measured one are still working.
    for (const id of [ids[0], ids.at(-1)]) {
      if (id !== undefined && await first.getTask(id) !== 'working') throw new Error(`task-cluster: task ${id} is not working any more (expected in flight)`)
    }
    return report(ctx, {
      store,
      create: totals(creates),
      rounds: creates.map((w) => totals([w])),
      inFlight,
      getC1: totals(getsC1),
      get: totals(gets),
      floor: floorTotals(floorWindows),
      template,
    })
  } finally {
    await Promise.all(floors.map((f) => f.close()))
    for (const view of views.reverse()) await view.close()
    ctx.log(`task-cluster: closing the gateways (their tasks are cancelled by the shutdown) and removing what they stored in ${SERVER_NAME[store]}`)
    await Promise.all(gateways.map((g) => g.close()))
    await shared.remove()
  }
}

/** The floor's windows: the load generator's runs and the three floor processes' CPU. */
interface FloorWindow {
  run: LoadRun
  cpuMs: number
}

function floorTotals (windows: readonly FloorWindow[]): FloorTotals {
  const calls = windows.reduce((n, w) => n + w.run.calls, 0)
  const elapsedMs = windows.reduce((n, w) => n + w.run.elapsedMs, 0)
  return {
    calls,
    elapsedMs,
    perSecond: calls / (elapsedMs / 1000),
    latency: summarize(concat(windows.map((w) => w.run.latencies))),
    clientCpuMs: windows.reduce((n, w) => n + w.run.clientCpuMs, 0),
    cpuMs: windows.reduce((n, w) => n + w.cpuMs, 0),
    perWindowPerSecond: windows.map((w) => w.run.calls / (w.run.elapsedMs / 1000)),
  }
}

export const taskClusterSection: Section = {
  id: 'task-cluster',
  title: 'Three gateway processes on one shared store (Redis, PostgreSQL): task creation and tasks/get (against three bare Fastify routes), requests round robin over the processes',
  run,
}
