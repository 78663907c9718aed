// Section "task-create": the latency of a task-augmented `tools/call` (2025-11-25 `params.task`) from
// sending it to receiving the CreateTaskResult, at concurrency 1, while BENCH_TASKS_IN_FLIGHT
// long-running tasks (demo `slow`, one hour) are in flight on the same principal, for the memory store,
// the sqlite store (a fresh temp file) and, when their servers answer, the redis store (a fresh key prefix,
// deleted afterwards) and the postgres store (a fresh schema, dropped afterwards). Every measured task stays in
// flight too, so the count grows from BENCH_TASKS_IN_FLIGHT (+ warm-up) by BENCH_TASK_CREATES during the
// measurement.
// After each store's creations of a round, as many tasks/get at concurrency 1 on the same gateway and session:
// the round-trip floor of the same run, the same client and the same tasks in flight.
// The same again for a 2026-07-28 client of the same gateway (no session lookup: each request carries its
// envelope and routing headers; the tasks extension declared, `tasks.decide: always`), whose tasks stay in flight too.
// Budgets (design.md §4), on every store measured and for both protocols: creation p99 ≤ 2 × the same run's
// tasks/get p99 of the same protocol, and ≤ 2 ms; no event-loop stall over 50 ms.
import { sequential } from '../lib/load.ts'
import { MODERN_VERSION } from '../lib/modern-http.ts'
import { concat, ms, summarize, type LatencySummary, type Table } from '../lib/stats.ts'
import {
  CREATE_WARMUP, LONG_TASK, LOOP_STALL_LIMIT_MS, SLOW_TOOL, TASK_TTL_MS, measureWindow, measuredStores, perCallUs, profileNotes,
  profiled, sharedTaskGateway, skippedStoreNotes, split, totalsOf, us, type StoreKind, type Window,
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

/** A store and a protocol: the 2025-11-25 session, or (`modern`) the 2026-07-28 client of the same gateway. */
interface Line { store: StoreKind, modern: boolean }

/** The key of a line in tables and in the JSON results: `memory`, `memory 2026-07-28`, … */
function keyOf ({ store, modern }: Line): string {
  return modern ? `${store} ${MODERN_VERSION}` : store
}

async function run (ctx: BenchContext): Promise<SectionResult> {
  const { settings } = ctx
  const stores = await measuredStores(ctx)
  // The gateways start and get their in-flight tasks side by side; then rounds alternate between them.
  const gateways = await Promise.all(stores.map((store) => sharedTaskGateway(ctx, store)))
  const byStore = new Map(gateways.map((g) => [g.store, g]))
  // One line per store and protocol: the session's client (2025-11-25) and the 2026-07-28 client of the same gateway.
  const lines: Line[] = stores.flatMap((store) => [{ store, modern: false }, { store, modern: true }])
  const create = ({ store, modern }: Line) => {
    const g = byStore.get(store)!
    return modern
      ? async (): Promise<void> => { g.modernIds.push(await g.modern.createTask(SLOW_TOOL, LONG_TASK)) }
      : async (): Promise<void> => { g.ids.push(await g.session.createTask(SLOW_TOOL, LONG_TASK, TASK_TTL_MS)) }
  }
  const get = ({ store, modern }: Line) => {
    const g = byStore.get(store)!
    const [client, ids] = modern ? [g.modern, g.modernIds] : [g.session, g.ids]
    let next = 0
    return async (): Promise<void> => {
      const id = ids[next++ % ids.length]!
      const status = await client.getTask(id)
      if (status !== 'working') throw new Error(`tasks/get ${id}: ${status}, expected working`)
    }
  }
  const inFlightOn = (store: StoreKind): number => byStore.get(store)!.ids.length + byStore.get(store)!.modernIds.length

  ctx.log(`task-create warm-up: ${CREATE_WARMUP} sequential creations and tasks/get per store and protocol`)
  for (const line of lines) {
    await sequential(create(line), CREATE_WARMUP)
    await sequential(get(line), CREATE_WARMUP)
  }

  const windows = new Map<string, { create: Window[], get: Window[], inFlight: Array<[number, number]> }>(
    lines.map((line) => [keyOf(line), { create: [], get: [], inFlight: [] }]))
  const rounds = split(settings.taskCreates, settings.rounds)
  const profiles: string[] = []
  for (const [round, count] of rounds.entries()) {
    for (const line of lines) {
      const g = byStore.get(line.store)!
      const w = windows.get(keyOf(line))!
      const before = inFlightOn(line.store)
      ctx.log(`task-create round ${round + 1}/${rounds.length}: ${count} sequential creations, then as many tasks/get, ${keyOf(line)}, ${before} tasks in flight`)
      await profiled(ctx, g.gateway, `task-create-${keyOf(line).replace(' ', '-')}-${round + 1}`, profiles, async () => {
        w.create.push(await measureWindow(ctx, g.gateway, () => sequential(create(line), count)))
      })
      w.inFlight.push([before, inFlightOn(line.store)])
      w.get.push(await measureWindow(ctx, g.gateway, () => sequential(get(line), count)))
    }
  }

  // The tasks really are in flight: the first seeded one and the last measured one of each protocol are still working.
  for (const g of gateways) {
    for (const [client, ids] of [[g.session, g.ids], [g.modern, g.modernIds]] as const) {
      for (const id of [ids[0], ids.at(-1)]) {
        if (id === undefined) continue
        const status = await client.getTask(id)
        if (status !== 'working') throw new Error(`${g.store}: task ${id} is ${status}, expected working (in flight)`)
      }
    }
  }

  const results: Record<string, StoreResult> = {}
  for (const key of lines.map(keyOf)) {
    const w = windows.get(key)!
    const span: [number, number] = [w.inFlight[0]![0], w.inFlight.at(-1)![1]]
    results[key] = {
      create: phase('create, all rounds', span, w.create),
      rounds: w.create.map((window, i) => phase(`create, round ${i + 1}`, w.inFlight[i]!, [window])),
      get: phase('tasks/get (floor)', [span[1], span[1]], w.get),
    }
  }

  const keys = lines.map(keyOf)
  const measured = (key: string): StoreResult => results[key]!
  const stall = Math.max(...keys.map((key) => measured(key).create.gatewayMaxLoopDelayMs ?? Number.NaN))
  const phases = (key: string): Phase[] => {
    const result = measured(key)
    return [...(result.rounds.length > 1 ? result.rounds : []), result.create, result.get]
  }
  const inFlight = (p: Phase): string => p.inFlight[0] === p.inFlight[1] ? String(p.inFlight[0]) : `${p.inFlight[0]}→${p.inFlight[1]}`
  const latencyTable: Table = {
    title: `task creation: tools/call ${SLOW_TOOL} as a task (params.task; ${MODERN_VERSION}: the tasks extension), concurrency 1 ` +
      `(${settings.taskCreates} creations per store and protocol, ms); tasks/get at concurrency 1 as the round-trip floor; in flight: all tasks of the gateway`,
    head: ['store / phase', 'in flight', 'p50', 'p90', 'p99', 'mean', 'max', 'req/s'],
    rows: keys.flatMap((key) => phases(key).map((p) => {
      const l = p.latency
      return [`${key} ${p.label}`, inFlight(p), ms(l.p50), ms(l.p90), ms(l.p99), ms(l.mean), ms(l.max), p.callsPerSecond.toFixed(0)]
    })),
  }
  const costTable: Table = {
    title: 'CPU µs per request by process, and worst event-loop delay (ms)',
    head: ['store / phase', 'client µs', 'gateway µs', 'upstream µs', 'client loop max', 'gateway loop max'],
    rows: keys.flatMap((key) => phases(key).map((p) => [`${key} ${p.label}`, us(p.cpuUsPerCall.client), us(p.cpuUsPerCall.gateway),
      us(p.cpuUsPerCall.upstream), ms(p.clientMaxLoopDelayMs, 1), ms(p.gatewayMaxLoopDelayMs, 1)])),
  }
  const inFlightLabel = `≥ ${settings.tasksInFlight} in flight${settings.tasksInFlight < 1000 ? ' (budget is stated for 1,000)' : ''}`
  const ratioOf = (key: string): number => measured(key).create.latency.p99 / measured(key).get.latency.p99
  const checks: Check[] = lines.flatMap((line): Check[] => {
    const key = keyOf(line)
    const create = measured(key).create.latency.p99
    const get = measured(key).get.latency.p99
    const ratio = ratioOf(key)
    const what = `task creation p99, ${line.store} store${line.modern ? `, ${MODERN_VERSION}` : ''}`
    return [
      {
        budget: `${what}, ${inFlightLabel}`,
        limit: `≤ ${P99_RATIO_LIMIT} × tasks/get p99`,
        measured: `${ratio.toFixed(2)} × (create ${ms(create)} ms vs tasks/get ${ms(get)} ms)`,
        pass: ratio <= P99_RATIO_LIMIT,
      },
      { budget: `${what}, absolute`, limit: `≤ ${P99_LIMIT_MS} ms`, measured: `${ms(create)} ms`, pass: create <= P99_LIMIT_MS },
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
    `${MODERN_VERSION}: a client without session on the same gateway (one anonymous principal), its envelope and Mcp-Method/Mcp-Name headers on every request, ` +
      'the tasks extension declared; the gateway answers its tools/call with a task at once (tasks.decide: always), and it reads only its own tasks',
    `rounds alternate between the stores and protocols (${rounds.join(' + ')} creations each); latencies include the client's own request and parsing cost (about the "client µs"); "tasks/get (floor)" is the same round trip without creating anything`,
    ...skippedStoreNotes(ctx, stores),
    ...stores.filter((s) => s === 'redis' || s === 'postgres').map((s) => `${s} store: one process here; three processes on one ${s === 'redis' ? 'Redis' : 'PostgreSQL'} in section task-cluster`),
    ...profileNotes(profiles),
  ]
  return {
    tables: [latencyTable, costTable],
    checks,
    notes,
    data: {
      ...results,
      p99RatioToTasksGet: Object.fromEntries(keys.map((key) => [key, ratioOf(key)])),
      limits: { p99Ratio: P99_RATIO_LIMIT, p99Ms: P99_LIMIT_MS },
      gatewayConfig: Object.fromEntries(gateways.map((g) => [g.store, g.gateway.config])),
      profiles,
    },
  }
}

export const taskCreateSection: Section = {
  id: 'task-create',
  title: 'Task creation latency with tasks in flight (memory, sqlite, redis and postgres store; 2025-11-25 and 2026-07-28 clients)',
  run,
}
