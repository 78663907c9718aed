// Section "task-cluster": the redis store on three gateway processes sharing one Redis key prefix (a
// fresh one, deleted afterwards). The bench client spreads its requests round robin over the three
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
// Skipped when no Redis answers at BENCH_REDIS_URL.
import { cpus } from 'node:os'
import { startFastifyFloor, type FloorHandle } from '../lib/floors.ts'
import type { GatewayHandle, ProbeStats } from '../lib/gateway.ts'
import { sequential, type LoadRun } from '../lib/load.ts'
import { generate, type PreparedRequest } from '../lib/loadgen.ts'
import { McpHttpSession, type TaskClient } from '../lib/mcp-http.ts'
import { procCpuMs } from '../lib/processes.ts'
import { BENCH_STATE_SECRET, freshRedisStore, redisCpuMs, redisReachable } from '../lib/redis.ts'
import { concat, ms, summarize, type LatencySummary, type Table } from '../lib/stats.ts'
import {
  CREATE_WARMUP, LONG_TASK, LOOP_STALL_LIMIT_MS, SLOW_TOOL, TASK_TTL_MS, closeSharedTaskGateways, createTasks, redisSkippedNote, split, us,
} from '../lib/tasks.ts'
import type { BenchContext, Check, Section, SectionResult } from '../lib/types.ts'

const PROCESSES = 3
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

/** One measured window over every process: the client's run, each gateway's own stats, the upstream's and Redis's CPU. */
interface ClusterWindow {
  run: LoadRun
  gateways: Array<ProbeStats | undefined>
  served: number[]
  upstreamCpuMs: number | undefined
  redisCpuMs: number | undefined
}

async function measure (
  ctx: BenchContext,
  gateways: GatewayHandle[],
  rr: RoundRobin,
  driver: () => Promise<LoadRun>,
): Promise<ClusterWindow> {
  await Promise.all(gateways.map((g) => g.resetStats()))
  rr.reset()
  const upstreamBefore = procCpuMs(ctx.upstream.pid)
  const redisBefore = await redisCpuMs(ctx.settings.redisUrl)
  const run = await driver()
  const upstreamAfter = procCpuMs(ctx.upstream.pid)
  const redisAfter = await redisCpuMs(ctx.settings.redisUrl)
  const delta = (a: number | undefined, b: number | undefined): number | undefined => a === undefined || b === undefined ? undefined : b - a
  return {
    run,
    gateways: await Promise.all(gateways.map((g) => g.readStats())),
    // The load generator sends its pre-built requests round robin over the processes: a third each.
    served: rr.served.some((n) => n > 0) ? [...rr.served] : rr.served.map((_, i) => Math.ceil((run.calls - i) / PROCESSES)),
    upstreamCpuMs: delta(upstreamBefore, upstreamAfter),
    redisCpuMs: delta(redisBefore, redisAfter),
  }
}

interface Totals {
  calls: number
  elapsedMs: number
  latency: LatencySummary
  perSecond: number
  clientCpuMs: number
  /** Per process: requests served, CPU, worst event-loop delay. */
  processes: Array<{ served: number, cpuMs: number | undefined, maxLoopDelayMs: number | undefined }>
  upstreamCpuMs: number | undefined
  redisCpuMs: number | undefined
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
    redisCpuMs: sum(windows.map((w) => w.redisCpuMs)),
  }
}

function perCall (cpuMs: number | undefined, calls: number): string {
  return us(cpuMs === undefined || calls === 0 ? undefined : cpuMs * 1000 / calls)
}

function busy (cpuMs: number | undefined, elapsedMs: number): string {
  return cpuMs === undefined ? '—' : `${(cpuMs / elapsedMs * 100).toFixed(0)} %`
}

function gatewaysCpuMs (t: Totals): number | undefined {
  return t.processes.some((p) => p.cpuMs === undefined) ? undefined : t.processes.reduce((n, p) => n + p.cpuMs!, 0)
}

async function run (ctx: BenchContext): Promise<SectionResult> {
  const { settings } = ctx
  if (!await redisReachable(settings.redisUrl)) return { tables: [], checks: [], notes: [redisSkippedNote(ctx)], data: { skipped: true } }
  // The single-process task gateways (thousands of tasks) would otherwise still be running.
  await closeSharedTaskGateways()

  const maxTasks = settings.tasksInFlight + CREATE_WARMUP + settings.taskCreates + 1000
  const redis = freshRedisStore(settings.redisUrl)
  ctx.log(`task-cluster: starting ${PROCESSES} gateways on one Redis key prefix (up to ${maxTasks} tasks in flight)`)
  const gateways = await Promise.all(Array.from({ length: PROCESSES }, () => ctx.startGateway({
    store: redis.config,
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
      creates.push(await measure(ctx, gateways, rr, () => sequential(create, count)))
      inFlight.push([before, ids.length])
      getsC1.push(await measure(ctx, gateways, rr, () => sequential(get, count)))
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
      gets.push(await measure(ctx, gateways, rr, load(prepared, slice)))
    }
    await measureFloor('closing floor window')
    // The tasks really are in flight: the first seeded one and the last measured one are still working.
    for (const id of [ids[0], ids.at(-1)]) {
      if (id !== undefined && await first.getTask(id) !== 'working') throw new Error(`task-cluster: task ${id} is not working any more (expected in flight)`)
    }
    return report(ctx, {
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
    ctx.log('task-cluster: closing the gateways (their tasks are cancelled by the shutdown) and deleting the Redis keys')
    await Promise.all(gateways.map((g) => g.close()))
    await redis.purge()
  }
}

/** The floor's windows: the load generator's runs and the three floor processes' CPU. */
interface FloorWindow {
  run: LoadRun
  cpuMs: number
}

interface FloorTotals {
  calls: number
  elapsedMs: number
  perSecond: number
  latency: LatencySummary
  clientCpuMs: number
  cpuMs: number
  perWindowPerSecond: number[]
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

interface Measured {
  create: Totals
  rounds: Totals[]
  inFlight: Array<[number, number]>
  /** tasks/get at concurrency 1 after each round's creations: the round-trip floor of the creation budget. */
  getC1: Totals
  get: Totals
  floor: FloorTotals
  template: { contentType: string, answer: Record<string, unknown> }
}

const GET_RATIO_LIMIT = 0.7
const P99_RATIO_LIMIT = 2
const P99_LIMIT_MS = 2

function checksOf (m: Measured, concurrency: number): Check[] {
  const getRatio = m.get.perSecond / m.floor.perSecond
  const createP99 = m.create.latency.p99
  const getP99 = m.getC1.latency.p99
  const loop = [m.create, m.getC1, m.get].flatMap((t) => t.processes.map((p) => p.maxLoopDelayMs ?? Number.NaN))
  const stall = Math.max(...loop)
  return [
    {
      budget: `tasks/get throughput, ${PROCESSES} processes on Redis${concurrency === 64 ? '' : ` (${concurrency} workers)`}`,
      limit: `≥ ${GET_RATIO_LIMIT * 100} % of ${PROCESSES} Fastify floors`,
      measured: `${(getRatio * 100).toFixed(0)} % (gateways ${m.get.perSecond.toFixed(0)}/s vs floors ${m.floor.perSecond.toFixed(0)}/s)`,
      pass: getRatio >= GET_RATIO_LIMIT,
    },
    {
      budget: `task creation p99, ${PROCESSES} processes on Redis`,
      limit: `≤ ${P99_RATIO_LIMIT} × tasks/get p99`,
      measured: `${(createP99 / getP99).toFixed(2)} × (create ${ms(createP99)} ms vs tasks/get ${ms(getP99)} ms)`,
      pass: createP99 / getP99 <= P99_RATIO_LIMIT,
    },
    { budget: `task creation p99, ${PROCESSES} processes on Redis, absolute`, limit: `≤ ${P99_LIMIT_MS} ms`, measured: `${ms(createP99)} ms`, pass: createP99 <= P99_LIMIT_MS },
    {
      budget: `event-loop stall in any of the ${PROCESSES} gateways`,
      limit: `≤ ${LOOP_STALL_LIMIT_MS} ms`,
      measured: Number.isNaN(stall) ? 'n/a' : `${stall.toFixed(1)} ms`,
      pass: Number.isNaN(stall) ? undefined : stall <= LOOP_STALL_LIMIT_MS,
    },
  ]
}

function report (ctx: BenchContext, m: Measured): SectionResult {
  const { settings } = ctx
  const { create, rounds, inFlight, get, getC1, floor } = m
  const span = `${inFlight[0]![0]}→${inFlight.at(-1)![1]}`
  const row = (label: string, t: { latency: LatencySummary, perSecond: number }, flight: string): string[] => {
    const l = t.latency
    return [label, flight, ms(l.p50), ms(l.p90), ms(l.p99), ms(l.mean), ms(l.max), t.perSecond.toFixed(0)]
  }
  const createTable: Table = {
    title: `task creation through ${PROCESSES} processes on one Redis, round robin, concurrency 1 (${settings.taskCreates} creations, ms); tasks/get at concurrency 1 as the round-trip floor`,
    head: ['phase', 'in flight', 'p50', 'p90', 'p99', 'mean', 'max', 'req/s'],
    rows: [
      ...(rounds.length > 1 ? rounds.map((t, i) => row(`create, round ${i + 1}`, t, `${inFlight[i]![0]}→${inFlight[i]![1]}`)) : []),
      row('create, all rounds', create, span),
      row('tasks/get (floor)', getC1, String(inFlight.at(-1)![1])),
    ],
  }
  const perProcess = get.perSecond / PROCESSES
  const getTable: Table = {
    title: `tasks/get through ${PROCESSES} processes on one Redis, ${settings.concurrency} workers of the load generator round robin (${settings.seconds} s, one session), against ${PROCESSES} bare Fastify routes`,
    head: ['target', 'requests', 'requests/s', 'of floor', 'p50 ms', 'p99 ms', 'server µs', 'server busy', 'gateway loop max ms'],
    rows: [
      ['floor: 3 bare Fastify routes', String(floor.calls), floor.perSecond.toFixed(0), '100 %', ms(floor.latency.p50), ms(floor.latency.p99),
        perCall(floor.cpuMs, floor.calls), busy(floor.cpuMs, floor.elapsedMs), '—'],
      ['gateways (aggregate)', String(get.calls), get.perSecond.toFixed(0), `${(get.perSecond / floor.perSecond * 100).toFixed(0)} %`, ms(get.latency.p50),
        ms(get.latency.p99), perCall(gatewaysCpuMs(get), get.calls), busy(gatewaysCpuMs(get), get.elapsedMs), ''],
      ...get.processes.map((p, i) => [`gateway process ${i + 1}`, String(p.served), (p.served / (get.elapsedMs / 1000)).toFixed(0), '', '', '',
        perCall(p.cpuMs, p.served), busy(p.cpuMs, get.elapsedMs), ms(p.maxLoopDelayMs, 1)]),
    ],
  }
  const costTable: Table = {
    title: 'CPU µs per request by process (gateways summed), and Redis (the whole server: other clients count too)',
    head: ['phase', 'client µs', 'client busy', 'gateways µs', 'upstream µs', 'redis µs', 'redis busy'],
    rows: [
      ...([['create, all rounds (bench client)', create], ['tasks/get c=1 (bench client)', getC1], ['tasks/get (load generator)', get]] as const)
        .map(([label, t]) => [label, perCall(t.clientCpuMs, t.calls), busy(t.clientCpuMs, t.elapsedMs), perCall(gatewaysCpuMs(t), t.calls),
          perCall(t.upstreamCpuMs, t.calls), perCall(t.redisCpuMs, t.calls), busy(t.redisCpuMs, t.elapsedMs)]),
      ['tasks/get on the floor (load generator)', perCall(floor.clientCpuMs, floor.calls), busy(floor.clientCpuMs, floor.elapsedMs), '', '', '', ''],
    ],
  }
  const notes = [
    `floor: ${PROCESSES} bare Fastify routes (own processes) answering the cluster's tasks/get answer (${m.template.contentType}), the very requests the gateways get, ` +
      `round robin the same way; floor windows: ${floor.perWindowPerSecond.map((r) => r.toFixed(0)).join(', ')} requests/s (their spread is the drift of the machine)`,
    `tasks/get ${get.perSecond.toFixed(0)}/s in aggregate, ${perProcess.toFixed(0)}/s per process; task creation p50 ${ms(create.latency.p50)} ms, p99 ${ms(create.latency.p99)} ms with ${span} tasks in flight`,
    `${PROCESSES} gateway processes (${settings.gatewayMode}), one Redis, one demo upstream and the load generator share ${cpus().length} cores: the per-process rate is the aggregate divided by ${PROCESSES}, bounded by the machine rather than by one process`,
    `one legacy session (one principal) for everything; each process runs the tasks it created (a third each), maxConcurrentCalls ${settings.maxConcurrentCalls ?? 16} per process hold an upstream connection, the rest wait in that process's queue`,
    'creations and tasks/get at concurrency 1 are sent by the bench process itself (the same client for both); tasks/get under load and its floor by the load generator',
  ]
  return {
    tables: [createTable, getTable, costTable],
    checks: checksOf(m, settings.concurrency),
    notes,
    data: {
      processes: PROCESSES,
      ...m,
      perProcessPerSecond: perProcess,
      ratios: { tasksGetToFloor: get.perSecond / floor.perSecond, createP99ToTasksGetP99: create.latency.p99 / getC1.latency.p99 },
      limits: { tasksGetRatio: GET_RATIO_LIMIT, p99Ratio: P99_RATIO_LIMIT, p99Ms: P99_LIMIT_MS },
    },
  }
}

export const taskClusterSection: Section = {
  id: 'task-cluster',
  title: 'Three gateway processes on one Redis: task creation and tasks/get (against three bare Fastify routes), requests round robin over the processes',
  run,
}
