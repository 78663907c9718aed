// Section "task-create": the latency of a task-augmented `tools/call` (2025-11-25 `params.task`) from
// sending it to receiving the CreateTaskResult, at concurrency 1, while BENCH_TASKS_IN_FLIGHT
// long-running tasks (demo `slow`, one hour) are in flight on the same principal, for the memory store,
// the sqlite store (a fresh temp file) and, when Redis answers, the redis store (a fresh key prefix,
// deleted afterwards). Every measured task stays in flight too, so the count grows from
// BENCH_TASKS_IN_FLIGHT (+ warm-up) by BENCH_TASK_CREATES during the measurement.
// After each store's creations of a round, as many tasks/get at concurrency 1 on the same gateway and session:
// the round-trip floor of the same run, the same client and the same tasks in flight.
// Budgets (design.md §4), on every store measured: creation p99 ≤ 2 × the same run's tasks/get p99, and ≤ 2 ms;
// no event-loop stall over 50 ms.
import { sequential } from '../lib/load.ts'
import { concat, ms, summarize, type LatencySummary, type Table } from '../lib/stats.ts'
import {
  CREATE_WARMUP, LONG_TASK, LOOP_STALL_LIMIT_MS, SLOW_TOOL, TASK_TTL_MS, measureWindow, measuredStores, perCallUs, profileNotes,
  profiled, redisSkippedNote, sharedTaskGateway, split, totalsOf, us, type StoreKind, type Window,
} from '../lib/tasks.ts'
import type { BenchContext, Check, Section, SectionResult } from '../lib/types.ts'

const P99_LIMIT_MS = 2
const P99_RATIO_LIMIT = 2

interface Phase {
  label: string
  /** Tasks in flight on this gateway at the start and at the end of the phase. */
  inFlight: [number, number]
  latency: LatencySummary
  calls: number
  callsPerSecond: number
  cpuUsPerCall: { client: number | undefined, gateway: number | undefined, upstream: number | undefined }
  clientMaxLoopDelayMs: number
  gatewayMaxLoopDelayMs: number | undefined
}

function phase (label: string, inFlight: [number, number], windows: readonly Window[]): Phase {
  const t = totalsOf(windows)
  return {
    label,
    inFlight,
    latency: summarize(concat(t.latencies)),
    calls: t.calls,
    callsPerSecond: t.calls / (t.elapsedMs / 1000),
    cpuUsPerCall: {
      client: perCallUs(t.clientCpuMs, t.calls),
      gateway: perCallUs(t.gatewayCpuMs, t.calls),
      upstream: perCallUs(t.upstreamCpuMs, t.calls),
    },
    clientMaxLoopDelayMs: t.clientMaxLoopDelayMs,
    gatewayMaxLoopDelayMs: t.gatewayMaxLoopDelayMs,
  }
}

interface StoreResult {
  /** All measured creations. */
  create: Phase
  /** The measured creations of each round (the in-flight count grows from round to round). */
  rounds: Phase[]
  /** tasks/get at concurrency 1 on the same gateway and session, as many as creations: the round-trip floor. */
  get: Phase
}

async function run (ctx: BenchContext): Promise<SectionResult> {
  const { settings } = ctx
  const stores = await measuredStores(ctx)
  // The gateways start and get their in-flight tasks side by side; then rounds alternate between them.
  const gateways = await Promise.all(stores.map((store) => sharedTaskGateway(ctx, store)))
  const byStore = new Map(gateways.map((g) => [g.store, g]))
  const create = (store: StoreKind) => {
    const g = byStore.get(store)!
    return async (): Promise<void> => { g.ids.push(await g.session.createTask(SLOW_TOOL, LONG_TASK, TASK_TTL_MS)) }
  }
  const get = (store: StoreKind) => {
    const g = byStore.get(store)!
    let next = 0
    return async (): Promise<void> => {
      const id = g.ids[next++ % g.ids.length]!
      const status = await g.session.getTask(id)
      if (status !== 'working') throw new Error(`tasks/get ${id}: ${status}, expected working`)
    }
  }

  ctx.log(`task-create warm-up: ${CREATE_WARMUP} sequential creations and tasks/get per store`)
  for (const store of stores) {
    await sequential(create(store), CREATE_WARMUP)
    await sequential(get(store), CREATE_WARMUP)
  }

  const windows = new Map<StoreKind, { create: Window[], get: Window[], inFlight: Array<[number, number]> }>(
    stores.map((store) => [store, { create: [], get: [], inFlight: [] }]))
  const rounds = split(settings.taskCreates, settings.rounds)
  const profiles: string[] = []
  for (const [round, count] of rounds.entries()) {
    for (const store of stores) {
      const g = byStore.get(store)!
      const w = windows.get(store)!
      const before = g.ids.length
      ctx.log(`task-create round ${round + 1}/${rounds.length}: ${count} sequential creations, then as many tasks/get, ${store} store, ${before} tasks in flight`)
      await profiled(ctx, g.gateway, `task-create-${store}-${round + 1}`, profiles, async () => {
        w.create.push(await measureWindow(ctx, g.gateway, () => sequential(create(store), count)))
      })
      w.inFlight.push([before, g.ids.length])
      w.get.push(await measureWindow(ctx, g.gateway, () => sequential(get(store), count)))
    }
  }

  // The tasks really are in flight: the first seeded one and the last measured one are still working.
  for (const g of gateways) {
    for (const id of [g.ids[0], g.ids.at(-1)]) {
      if (id === undefined) continue
      const status = await g.session.getTask(id)
      if (status !== 'working') throw new Error(`${g.store}: task ${id} is ${status}, expected working (in flight)`)
    }
  }

  const results: Partial<Record<StoreKind, StoreResult>> = {}
  for (const store of stores) {
    const w = windows.get(store)!
    const span: [number, number] = [w.inFlight[0]![0], w.inFlight.at(-1)![1]]
    results[store] = {
      create: phase('create, all rounds', span, w.create),
      rounds: w.create.map((window, i) => phase(`create, round ${i + 1}`, w.inFlight[i]!, [window])),
      get: phase('tasks/get (floor)', [span[1], span[1]], w.get),
    }
  }

  const measured = (store: StoreKind): StoreResult => results[store]!
  const stall = Math.max(...stores.map((store) => measured(store).create.gatewayMaxLoopDelayMs ?? Number.NaN))
  const phases = (store: StoreKind): Phase[] => {
    const result = measured(store)
    return [...(result.rounds.length > 1 ? result.rounds : []), result.create, result.get]
  }
  const inFlight = (p: Phase): string => p.inFlight[0] === p.inFlight[1] ? String(p.inFlight[0]) : `${p.inFlight[0]}→${p.inFlight[1]}`
  const latencyTable: Table = {
    title: `task creation: tools/call ${SLOW_TOOL} with params.task, concurrency 1 (${settings.taskCreates} creations per store, ms); tasks/get at concurrency 1 as the round-trip floor`,
    head: ['store / phase', 'in flight', 'p50', 'p90', 'p99', 'mean', 'max', 'req/s'],
    rows: stores.flatMap((store) => phases(store).map((p) => {
      const l = p.latency
      return [`${store} ${p.label}`, inFlight(p), ms(l.p50), ms(l.p90), ms(l.p99), ms(l.mean), ms(l.max), p.callsPerSecond.toFixed(0)]
    })),
  }
  const costTable: Table = {
    title: 'CPU µs per request by process, and worst event-loop delay (ms)',
    head: ['store / phase', 'client µs', 'gateway µs', 'upstream µs', 'client loop max', 'gateway loop max'],
    rows: stores.flatMap((store) => phases(store).map((p) => [`${store} ${p.label}`, us(p.cpuUsPerCall.client), us(p.cpuUsPerCall.gateway),
      us(p.cpuUsPerCall.upstream), ms(p.clientMaxLoopDelayMs, 1), ms(p.gatewayMaxLoopDelayMs, 1)])),
  }
  const inFlightLabel = `≥ ${settings.tasksInFlight} in flight${settings.tasksInFlight < 1000 ? ' (budget is stated for 1,000)' : ''}`
  const ratioOf = (store: StoreKind): number => measured(store).create.latency.p99 / measured(store).get.latency.p99
  const checks: Check[] = stores.flatMap((store): Check[] => {
    const create = measured(store).create.latency.p99
    const get = measured(store).get.latency.p99
    const ratio = ratioOf(store)
    return [
      {
        budget: `task creation p99, ${store} store, ${inFlightLabel}`,
        limit: `≤ ${P99_RATIO_LIMIT} × tasks/get p99`,
        measured: `${ratio.toFixed(2)} × (create ${ms(create)} ms vs tasks/get ${ms(get)} ms)`,
        pass: ratio <= P99_RATIO_LIMIT,
      },
      { budget: `task creation p99, ${store} store, absolute`, limit: `≤ ${P99_LIMIT_MS} ms`, measured: `${ms(create)} ms`, pass: create <= P99_LIMIT_MS },
    ]
  })
  checks.push({
    budget: 'event-loop stall in the gateway, task creation',
    limit: `≤ ${LOOP_STALL_LIMIT_MS} ms`,
    measured: Number.isNaN(stall) ? 'n/a' : `${stall.toFixed(1)} ms`,
    pass: Number.isNaN(stall) ? undefined : stall <= LOOP_STALL_LIMIT_MS,
  })
  const notes = [
    `one gateway per store, each with one session (= one principal, auth off) holding every task; ${settings.tasksInFlight} tasks of ${SLOW_TOOL} (1 h) put in flight first, then ${CREATE_WARMUP} warm-up creations, then the measured ones, which stay in flight too`,
    `maxConcurrentCalls ${settings.maxConcurrentCalls ?? 16}: that many tasks hold an upstream connection, the others wait in the upstream pool's queue (in flight for the client); maxActivePerPrincipal and maxQueuedCalls raised to fit`,
    `rounds alternate between the stores (${rounds.join(' + ')} creations per store); latencies include the client's own request and parsing cost (about the "client µs"); "tasks/get (floor)" is the same round trip without creating anything`,
    ...(results.redis === undefined ? [redisSkippedNote(ctx)] : ['redis store: one process here; three processes on one Redis in section task-cluster']),
    ...profileNotes(profiles),
  ]
  return {
    tables: [latencyTable, costTable],
    checks,
    notes,
    data: {
      ...results,
      p99RatioToTasksGet: Object.fromEntries(stores.map((store) => [store, ratioOf(store)])),
      limits: { p99Ratio: P99_RATIO_LIMIT, p99Ms: P99_LIMIT_MS },
      gatewayConfig: Object.fromEntries(gateways.map((g) => [g.store, g.gateway.config])),
      profiles,
    },
  }
}

export const taskCreateSection: Section = {
  id: 'task-create',
  title: 'Task creation latency with tasks in flight (memory, sqlite and redis store)',
  run,
}
