// The tables, checks and notes of section "task-cluster" (task-cluster.ts) from what it measured on one shared
// store: the budgets of design.md §4 for one process, held by three on Redis or PostgreSQL.
import { cpus } from 'node:os'
import { ms, type LatencySummary, type Table } from '../lib/stats.ts'
import { LOOP_STALL_LIMIT_MS, us, type SharedStoreKind } from '../lib/tasks.ts'
import type { BenchContext, Check, SectionResult } from '../lib/types.ts'

export const PROCESSES = 3

/** How the report names a shared store's server. */
export const SERVER_NAME: Record<SharedStoreKind, string> = { redis: 'Redis', postgres: 'PostgreSQL' }

export interface Totals {
  calls: number
  elapsedMs: number
  latency: LatencySummary
  perSecond: number
  clientCpuMs: number
  /** Per process: requests served, CPU, worst event-loop delay. */
  processes: Array<{ served: number, cpuMs: number | undefined, maxLoopDelayMs: number | undefined }>
  upstreamCpuMs: number | undefined
  /** CPU the store's server used (the whole server: other clients count too). */
  serverCpuMs: number | undefined
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

export interface FloorTotals {
  calls: number
  elapsedMs: number
  perSecond: number
  latency: LatencySummary
  clientCpuMs: number
  cpuMs: number
  perWindowPerSecond: number[]
}

export interface Measured {
  store: SharedStoreKind
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
  const on = `${PROCESSES} processes on ${SERVER_NAME[m.store]}`
  const getRatio = m.get.perSecond / m.floor.perSecond
  const createP99 = m.create.latency.p99
  const getP99 = m.getC1.latency.p99
  const loop = [m.create, m.getC1, m.get].flatMap((t) => t.processes.map((p) => p.maxLoopDelayMs ?? Number.NaN))
  const stall = Math.max(...loop)
  return [
    {
      budget: `tasks/get throughput, ${on}${concurrency === 64 ? '' : ` (${concurrency} workers)`}`,
      limit: `≥ ${GET_RATIO_LIMIT * 100} % of ${PROCESSES} Fastify floors`,
      measured: `${(getRatio * 100).toFixed(0)} % (gateways ${m.get.perSecond.toFixed(0)}/s vs floors ${m.floor.perSecond.toFixed(0)}/s)`,
      pass: getRatio >= GET_RATIO_LIMIT,
    },
    {
      budget: `task creation p99, ${on}`,
      limit: `≤ ${P99_RATIO_LIMIT} × tasks/get p99`,
      measured: `${(createP99 / getP99).toFixed(2)} × (create ${ms(createP99)} ms vs tasks/get ${ms(getP99)} ms)`,
      pass: createP99 / getP99 <= P99_RATIO_LIMIT,
    },
    { budget: `task creation p99, ${on}, absolute`, limit: `≤ ${P99_LIMIT_MS} ms`, measured: `${ms(createP99)} ms`, pass: createP99 <= P99_LIMIT_MS },
    {
      budget: `event-loop stall in any of the ${on}`,
      limit: `≤ ${LOOP_STALL_LIMIT_MS} ms`,
      measured: Number.isNaN(stall) ? 'n/a' : `${stall.toFixed(1)} ms`,
      pass: Number.isNaN(stall) ? undefined : stall <= LOOP_STALL_LIMIT_MS,
    },
  ]
}

/** The section's result for one store (task-cluster.ts puts those of the stores together). */
export function report (ctx: BenchContext, m: Measured): SectionResult {
  const server = SERVER_NAME[m.store]
  const { settings } = ctx
  const { create, rounds, inFlight, get, getC1, floor } = m
  const span = `${inFlight[0]![0]}→${inFlight.at(-1)![1]}`
  const row = (label: string, t: { latency: LatencySummary, perSecond: number }, flight: string): string[] => {
    const l = t.latency
    return [label, flight, ms(l.p50), ms(l.p90), ms(l.p99), ms(l.mean), ms(l.max), t.perSecond.toFixed(0)]
  }
  const createTable: Table = {
    title: `task creation through ${PROCESSES} processes on one ${server}, round robin, concurrency 1 (${settings.taskCreates} creations, ms); tasks/get at concurrency 1 as the round-trip floor`,
    head: ['phase', 'in flight', 'p50', 'p90', 'p99', 'mean', 'max', 'req/s'],
    rows: [
      ...(rounds.length > 1 ? rounds.map((t, i) => row(`create, round ${i + 1}`, t, `${inFlight[i]![0]}→${inFlight[i]![1]}`)) : []),
      row('create, all rounds', create, span),
      row('tasks/get (floor)', getC1, String(inFlight.at(-1)![1])),
    ],
  }
  const perProcess = get.perSecond / PROCESSES
  const getTable: Table = {
    title: `tasks/get through ${PROCESSES} processes on one ${server}, ${settings.concurrency} workers of the load generator round robin (${settings.seconds} s, one session), against ${PROCESSES} bare Fastify routes`,
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
    title: `CPU µs per request by process (gateways summed), and ${server} (the whole server: other clients count too)`,
    head: ['phase', 'client µs', 'client busy', 'gateways µs', 'upstream µs', `${m.store} µs`, `${m.store} busy`],
    rows: [
      ...([['create, all rounds (bench client)', create], ['tasks/get c=1 (bench client)', getC1], ['tasks/get (load generator)', get]] as const)
        .map(([label, t]) => [label, perCall(t.clientCpuMs, t.calls), busy(t.clientCpuMs, t.elapsedMs), perCall(gatewaysCpuMs(t), t.calls),
          perCall(t.upstreamCpuMs, t.calls), perCall(t.serverCpuMs, t.calls), busy(t.serverCpuMs, t.elapsedMs)]),
      ['tasks/get on the floor (load generator)', perCall(floor.clientCpuMs, floor.calls), busy(floor.clientCpuMs, floor.elapsedMs), '', '', '', ''],
    ],
  }
  const notes = [
    `floor: ${PROCESSES} bare Fastify routes (own processes) answering the cluster's tasks/get answer (${m.template.contentType}), the very requests the gateways get, ` +
      `round robin the same way; floor windows: ${floor.perWindowPerSecond.map((r) => r.toFixed(0)).join(', ')} requests/s (their spread is the drift of the machine)`,
    `tasks/get ${get.perSecond.toFixed(0)}/s in aggregate, ${perProcess.toFixed(0)}/s per process; task creation p50 ${ms(create.latency.p50)} ms, p99 ${ms(create.latency.p99)} ms with ${span} tasks in flight`,
    `${PROCESSES} gateway processes (${settings.gatewayMode}), one ${server}, one demo upstream and the load generator share ${cpus().length} cores: the per-process rate is the aggregate divided by ${PROCESSES}, bounded by the machine rather than by one process`,
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
