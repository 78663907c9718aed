// Section "task-cluster": the redis store on three gateway processes sharing one Redis key prefix (a
// fresh one, deleted afterwards). The bench client spreads its requests round robin over the three
// processes' URLs (each request straight to the next process, no balancer), all on one legacy session:
// the store holds it, so every process serves it. BENCH_TASKS_IN_FLIGHT long-running tasks are put in
// flight first (each process runs the ones it created), then BENCH_TASK_CREATES creations at concurrency
// 1 are measured while more than that many are in flight, then tasks/get with BENCH_CONCURRENCY workers
// for BENCH_SECONDS: the aggregate rate, and what each process served.
// No budget: design.md §4 states its budgets for one process with the sqlite or memory store; these
// numbers are reported. Skipped when no Redis answers at BENCH_REDIS_URL.
import { cpus } from 'node:os'
import type { GatewayHandle, ProbeStats } from '../lib/gateway.ts'
import { concurrent, sequential, type LoadRun } from '../lib/load.ts'
import { McpHttpSession, type TaskClient } from '../lib/mcp-http.ts'
import { procCpuMs } from '../lib/processes.ts'
import { freshRedisStore, redisCpuMs, redisReachable } from '../lib/redis.ts'
import { concat, ms, summarize, type LatencySummary, type Table } from '../lib/stats.ts'
import { CREATE_WARMUP, LONG_TASK, SLOW_TOOL, TASK_TTL_MS, closeSharedTaskGateways, createTasks, redisSkippedNote, split, us } from '../lib/tasks.ts'
import type { BenchContext, Section, SectionResult } from '../lib/types.ts'

const PROCESSES = 3
const WARMUP_MS = 1000

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
    served: [...rr.served],
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
    server: { shutdownGrace: 0 },
  })))
  const connections = Math.max(64, settings.concurrency)
  let first: McpHttpSession | undefined
  const views: McpHttpSession[] = []
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
    const inFlight: Array<[number, number]> = []
    for (const [round, count] of split(settings.taskCreates, settings.rounds).entries()) {
      ctx.log(`task-cluster create round ${round + 1}: ${count} sequential creations, ${ids.length} tasks in flight`)
      const before = ids.length
      creates.push(await measure(ctx, gateways, rr, () => sequential(create, count)))
      inFlight.push([before, ids.length])
    }
    ctx.log(`task-cluster tasks/get warm-up: ${settings.concurrency} workers for ${WARMUP_MS / 1000} s`)
    await concurrent(get, settings.concurrency, WARMUP_MS)
    const gets: ClusterWindow[] = []
    const slice = settings.seconds * 1000 / settings.rounds
    for (let round = 0; round < settings.rounds; round++) {
      ctx.log(`task-cluster tasks/get round ${round + 1}/${settings.rounds}: ${settings.concurrency} workers for ${(slice / 1000).toFixed(1)} s, ${ids.length} task ids`)
      gets.push(await measure(ctx, gateways, rr, () => concurrent(get, settings.concurrency, slice)))
    }
    // The tasks really are in flight: the first seeded one and the last measured one are still working.
    for (const id of [ids[0], ids.at(-1)]) {
      if (id !== undefined && await first.getTask(id) !== 'working') throw new Error(`task-cluster: task ${id} is not working any more (expected in flight)`)
    }
    return report(ctx, totals(creates), creates.map((w) => totals([w])), inFlight, totals(gets))
  } finally {
    for (const view of views.reverse()) await view.close()
    ctx.log('task-cluster: closing the gateways (their tasks are cancelled by the shutdown) and deleting the Redis keys')
    await Promise.all(gateways.map((g) => g.close()))
    await redis.purge()
  }
}

function report (ctx: BenchContext, create: Totals, rounds: Totals[], inFlight: Array<[number, number]>, get: Totals): SectionResult {
  const { settings } = ctx
  const span = `${inFlight[0]![0]}→${inFlight.at(-1)![1]}`
  const createRow = (label: string, t: Totals, flight: string): string[] => {
    const l = t.latency
    return [label, flight, ms(l.p50), ms(l.p90), ms(l.p99), ms(l.mean), ms(l.max), t.perSecond.toFixed(0)]
  }
  const createTable: Table = {
    title: `task creation through ${PROCESSES} processes on one Redis, round robin, concurrency 1 (${settings.taskCreates} creations, ms)`,
    head: ['phase', 'in flight', 'p50', 'p90', 'p99', 'mean', 'max', 'req/s'],
    rows: [
      ...(rounds.length > 1 ? rounds.map((t, i) => createRow(`create, round ${i + 1}`, t, `${inFlight[i]![0]}→${inFlight[i]![1]}`)) : []),
      createRow('create, all rounds', create, span),
    ],
  }
  const perProcess = get.perSecond / PROCESSES
  const getTable: Table = {
    title: `tasks/get through ${PROCESSES} processes on one Redis, ${settings.concurrency} workers round robin (${settings.seconds} s, one session)`,
    head: ['process', 'requests', 'requests/s', 'p50 ms', 'p99 ms', 'gateway µs', 'gateway busy', 'gateway loop max ms'],
    rows: [
      ['all (aggregate)', String(get.calls), get.perSecond.toFixed(0), ms(get.latency.p50), ms(get.latency.p99), perCall(gatewaysCpuMs(get), get.calls), '', ''],
      ...get.processes.map((p, i) => [`process ${i + 1}`, String(p.served), (p.served / (get.elapsedMs / 1000)).toFixed(0), '', '',
        perCall(p.cpuMs, p.served), busy(p.cpuMs, get.elapsedMs), ms(p.maxLoopDelayMs, 1)]),
    ],
  }
  const costTable: Table = {
    title: 'CPU µs per request by process (gateways summed), and Redis (the whole server: other clients count too)',
    head: ['phase', 'client µs', 'gateways µs', 'upstream µs', 'redis µs', 'redis busy'],
    rows: [
      ['create, all rounds', perCall(create.clientCpuMs, create.calls), perCall(gatewaysCpuMs(create), create.calls), perCall(create.upstreamCpuMs, create.calls),
        perCall(create.redisCpuMs, create.calls), busy(create.redisCpuMs, create.elapsedMs)],
      ['tasks/get', perCall(get.clientCpuMs, get.calls), perCall(gatewaysCpuMs(get), get.calls), perCall(get.upstreamCpuMs, get.calls),
        perCall(get.redisCpuMs, get.calls), busy(get.redisCpuMs, get.elapsedMs)],
    ],
  }
  const notes = [
    `redis store, ${PROCESSES} processes (reported, no budget): tasks/get ${get.perSecond.toFixed(0)}/s in aggregate, ${perProcess.toFixed(0)}/s per process; ` +
      `task creation p50 ${ms(create.latency.p50)} ms, p99 ${ms(create.latency.p99)} ms with ${span} tasks in flight`,
    `${PROCESSES} gateway processes (${settings.gatewayMode}), one Redis, one demo upstream and the bench client share ${cpus().length} cores: the per-process rate is the aggregate divided by ${PROCESSES}, bounded by the machine rather than by one process`,
    `one legacy session (one principal) for everything; each process runs the tasks it created (a third each), maxConcurrentCalls ${settings.maxConcurrentCalls ?? 16} per process hold an upstream connection, the rest wait in that process's queue`,
  ]
  return {
    tables: [createTable, getTable, costTable],
    checks: [],
    notes,
    data: { processes: PROCESSES, create, rounds, inFlight, get, perProcessPerSecond: perProcess },
  }
}

export const taskClusterSection: Section = {
  id: 'task-cluster',
  title: 'Three gateway processes on one Redis: task creation and tasks/get, requests round robin over the processes',
  run,
}
