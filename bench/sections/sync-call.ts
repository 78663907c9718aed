// Section "sync-call": the demo `echo` tool called directly on the upstream and through the gateway
// (`demo__echo`), at concurrency 1 (added latency) and at high concurrency (throughput ratio).
// Budgets (design.md §4): added p50 ≤ 0.25 ms; gateway throughput ≥ 60 % of direct; no event-loop
// stall over 50 ms.
import { cpus } from 'node:os'
import { concurrent, sequential, type LoadRun } from '../lib/load.ts'
import { McpHttpSession } from '../lib/mcp-http.ts'
import type { GatewayHandle, ProbeStats } from '../lib/gateway.ts'
import { procCpuMs } from '../lib/processes.ts'
import { profiled } from '../lib/tasks.ts'
import { concat, ms, signedMs, summarize, type LatencySummary, type Table } from '../lib/stats.ts'
import type { BenchContext, Check, Section, SectionResult } from '../lib/types.ts'

const ADDED_P50_LIMIT_MS = 0.25
const THROUGHPUT_RATIO_LIMIT = 0.6
const LOOP_STALL_LIMIT_MS = 50
const TEXT = 'benchmark payload'

type PathName = 'direct' | 'gateway'

/** One path's measurement, summed over its rounds. */
interface PathTotals {
  calls: number
  elapsedMs: number
  latencies: Float64Array[]
  clientCpuMs: number
  clientMaxLoopDelayMs: number
  upstreamCpuMs: number | undefined
  gatewayCpuMs: number | undefined
  gatewayMaxLoopDelayMs: number | undefined
}

function emptyTotals (): PathTotals {
  return {
    calls: 0,
    elapsedMs: 0,
    latencies: [],
    clientCpuMs: 0,
    clientMaxLoopDelayMs: 0,
    upstreamCpuMs: 0,
    gatewayCpuMs: 0,
    gatewayMaxLoopDelayMs: 0,
  }
}

function add (a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined || b === undefined ? undefined : a + b
}

/** Runs one driver while sampling the upstream's CPU and the gateway's own stats, and adds it to `totals`. */
async function measure (ctx: BenchContext, gateway: GatewayHandle, totals: PathTotals, driver: () => Promise<LoadRun>): Promise<void> {
  await gateway.resetStats()
  const upstreamBefore = procCpuMs(ctx.upstream.pid)
  const run = await driver()
  const upstreamAfter = procCpuMs(ctx.upstream.pid)
  const stats: ProbeStats | undefined = await gateway.readStats()
  totals.calls += run.calls
  totals.elapsedMs += run.elapsedMs
  totals.latencies.push(run.latencies)
  totals.clientCpuMs += run.clientCpuMs
  totals.clientMaxLoopDelayMs = Math.max(totals.clientMaxLoopDelayMs, run.clientMaxLoopDelayMs)
  const upstreamCpuMs = upstreamBefore === undefined || upstreamAfter === undefined ? undefined : upstreamAfter - upstreamBefore
  totals.upstreamCpuMs = add(totals.upstreamCpuMs, upstreamCpuMs)
  totals.gatewayCpuMs = add(totals.gatewayCpuMs, stats?.cpuMs)
  totals.gatewayMaxLoopDelayMs = stats === undefined || totals.gatewayMaxLoopDelayMs === undefined
    ? undefined
    : Math.max(totals.gatewayMaxLoopDelayMs, stats.maxLoopDelayMs)
}

interface PhaseResult {
  latency: LatencySummary
  calls: number
  elapsedMs: number
  callsPerSecond: number
  /** CPU µs per call of each process during this path's runs (gateway only on the gateway path). */
  cpuUsPerCall: { client: number, upstream: number | undefined, gateway: number | undefined }
  clientMaxLoopDelayMs: number
  gatewayMaxLoopDelayMs: number | undefined
}

function phaseResult (totals: PathTotals, path: PathName): PhaseResult {
  const perCall = (cpuMs: number | undefined): number | undefined => cpuMs === undefined ? undefined : cpuMs * 1000 / totals.calls
  return {
    latency: summarize(concat(totals.latencies)),
    calls: totals.calls,
    elapsedMs: totals.elapsedMs,
    callsPerSecond: totals.calls / (totals.elapsedMs / 1000),
    cpuUsPerCall: {
      client: perCall(totals.clientCpuMs)!,
      upstream: perCall(totals.upstreamCpuMs),
      gateway: path === 'gateway' ? perCall(totals.gatewayCpuMs) : undefined,
    },
    clientMaxLoopDelayMs: totals.clientMaxLoopDelayMs,
    gatewayMaxLoopDelayMs: path === 'gateway' ? totals.gatewayMaxLoopDelayMs : undefined,
  }
}

/** Splits `total` into `parts` near-equal positive integers. */
function split (total: number, parts: number): number[] {
  return Array.from({ length: parts }, (_, i) => Math.floor(total * (i + 1) / parts) - Math.floor(total * i / parts)).filter((n) => n > 0)
}

function us (value: number | undefined): string {
  return value === undefined ? '—' : value.toFixed(0)
}

async function run (ctx: BenchContext): Promise<SectionResult> {
  const { settings } = ctx
  const gateway = await ctx.gateway()
  const profiles: string[] = []
  // The gateway is idle during direct rounds, so a profile of a whole round shows only the gateway path.
  const profileAs = async (name: string, body: () => Promise<void>): Promise<void> => await profiled(ctx, gateway, `sync-call-${name}`, profiles, body)
  const sessions: Record<PathName, McpHttpSession | undefined> = { direct: undefined, gateway: undefined }
  try {
    sessions.direct = await McpHttpSession.open(ctx.upstream.url, settings.concurrency)
    sessions.gateway = await McpHttpSession.open(gateway.url, settings.concurrency)
    const calls: Record<PathName, () => Promise<void>> = {
      direct: () => sessions.direct!.echo('echo', TEXT),
      gateway: () => sessions.gateway!.echo('demo__echo', TEXT),
    }
    const paths: PathName[] = ['direct', 'gateway']

    ctx.log(`warm-up: ${settings.warmup} sequential calls, then ${settings.concurrency} workers for 1 s, per path`)
    for (const path of paths) {
      await sequential(calls[path], settings.warmup)
      await concurrent(calls[path], settings.concurrency, 1000)
    }

    const c1 = { direct: emptyTotals(), gateway: emptyTotals() }
    const rounds = split(settings.calls, settings.rounds)
    await profileAs('c1', async () => {
      for (const [round, count] of rounds.entries()) {
        for (const path of paths) {
          ctx.log(`concurrency 1, round ${round + 1}/${rounds.length}: ${count} calls ${path}`)
          await measure(ctx, gateway, c1[path], () => sequential(calls[path], count))
        }
      }
    })

    const cN = { direct: emptyTotals(), gateway: emptyTotals() }
    const slice = settings.seconds * 1000 / settings.rounds
    await profileAs(`c${settings.concurrency}`, async () => {
      for (let round = 0; round < settings.rounds; round++) {
        for (const path of paths) {
          ctx.log(`concurrency ${settings.concurrency}, round ${round + 1}/${settings.rounds}: ${(slice / 1000).toFixed(1)} s ${path}`)
          await measure(ctx, gateway, cN[path], () => concurrent(calls[path], settings.concurrency, slice))
        }
      }
    })
    const finalStats = await gateway.readStats({ gc: true })

    const one = { direct: phaseResult(c1.direct, 'direct'), gateway: phaseResult(c1.gateway, 'gateway') }
    const many = { direct: phaseResult(cN.direct, 'direct'), gateway: phaseResult(cN.gateway, 'gateway') }
    const addedP50 = one.gateway.latency.p50 - one.direct.latency.p50
    const addedP99 = one.gateway.latency.p99 - one.direct.latency.p99
    const ratio = many.gateway.callsPerSecond / many.direct.callsPerSecond
    const gatewayStall = settings.gatewayMode === 'child'
      ? Math.max(one.gateway.gatewayMaxLoopDelayMs ?? Number.NaN, many.gateway.gatewayMaxLoopDelayMs ?? Number.NaN)
      : Math.max(one.gateway.clientMaxLoopDelayMs, many.gateway.clientMaxLoopDelayMs)

    const latencyTable: Table = {
      title: `tools/call echo, concurrency 1 (${one.direct.calls} sequential calls per path, ms)`,
      head: ['path', 'p50', 'p90', 'p99', 'mean', 'max', 'calls/s'],
      rows: [
        ...paths.map((path) => {
          const l = one[path].latency
          return [path, ms(l.p50), ms(l.p90), ms(l.p99), ms(l.mean), ms(l.max), one[path].callsPerSecond.toFixed(0)]
        }),
        ['added (gateway − direct)', signedMs(addedP50), signedMs(one.gateway.latency.p90 - one.direct.latency.p90), signedMs(addedP99),
          signedMs(one.gateway.latency.mean - one.direct.latency.mean), '', ''],
      ],
    }
    const throughputTable: Table = {
      title: `tools/call echo, concurrency ${settings.concurrency} (${settings.seconds} s per path, one session per path)`,
      head: ['path', 'calls', 'calls/s', 'p50 ms', 'p99 ms', 'max ms'],
      rows: [
        ...paths.map((path) => {
          const p = many[path]
          return [path, String(p.calls), p.callsPerSecond.toFixed(0), ms(p.latency.p50), ms(p.latency.p99), ms(p.latency.max)]
        }),
        ['ratio gateway / direct', '', `${(ratio * 100).toFixed(1)} %`, '', '', ''],
      ],
    }
    const gatewaySide = settings.gatewayMode === 'child' ? 'gateway' : 'gateway (in-process: = client)'
    const costTable: Table = {
      title: 'CPU µs per call by process, and worst event-loop delay (ms)',
      head: ['phase / path', 'client µs', `${gatewaySide} µs`, 'upstream µs', 'client loop max', 'gateway loop max'],
      rows: [
        ...(['c1', 'cN'] as const).flatMap((phase) => paths.map((path) => {
          const p = (phase === 'c1' ? one : many)[path]
          const label = `${phase === 'c1' ? 'c=1' : `c=${settings.concurrency}`} ${path}`
          return [label, us(p.cpuUsPerCall.client), us(p.cpuUsPerCall.gateway), us(p.cpuUsPerCall.upstream),
            ms(p.clientMaxLoopDelayMs, 1), path === 'gateway' ? ms(p.gatewayMaxLoopDelayMs, 1) : '—']
        })),
      ],
    }

    const checks: Check[] = [
      { budget: 'added p50 latency, concurrency 1', limit: `≤ ${ADDED_P50_LIMIT_MS} ms`, measured: `${signedMs(addedP50)} ms`, pass: addedP50 <= ADDED_P50_LIMIT_MS },
      { budget: `throughput at concurrency ${settings.concurrency}`, limit: `≥ ${THROUGHPUT_RATIO_LIMIT * 100} % of direct`, measured: `${(ratio * 100).toFixed(1)} %`, pass: ratio >= THROUGHPUT_RATIO_LIMIT },
      {
        budget: `event-loop stall in the ${settings.gatewayMode === 'child' ? 'gateway process' : 'bench+gateway process'}`,
        limit: `≤ ${LOOP_STALL_LIMIT_MS} ms`,
        measured: Number.isNaN(gatewayStall) ? 'n/a' : `${gatewayStall.toFixed(1)} ms`,
        pass: Number.isNaN(gatewayStall) ? undefined : gatewayStall <= LOOP_STALL_LIMIT_MS,
      },
    ]
    if (settings.concurrency !== 64) checks[1]!.budget += ' (budget is stated for 64)'

    const maxCalls = settings.maxConcurrentCalls ?? 16
    const notes = [
      settings.gatewayMode === 'child'
        ? 'gateway: separate process (node --import tsx src/main.ts); "client loop max" covers the bench process only, "gateway loop max" comes from a probe preloaded into the gateway'
        : 'gateway: in-process, sharing the event loop and CPU with the load generator (penalises the gateway)',
      `gateway upstream connections for calls: maxConcurrentCalls = ${maxCalls}${settings.maxConcurrentCalls === undefined ? ' (default)' : ''}; at concurrency ${settings.concurrency} ${settings.concurrency > maxCalls ? `${settings.concurrency - maxCalls} calls queue in the gateway for a connection` : 'no call queues'}`,
      `${cpus().length} CPU cores shared by the bench client, the upstream and the gateway: the gateway path runs three busy processes where the direct path runs two`,
      ...profiles.map((file) => `gateway CPU profile (numbers above are perturbed by profiling): ${file} — summarise with: npx tsx bench/tools/cpuprofile-top.ts ${file}`),
      ...(finalStats ? [`gateway after the run and a full GC: RSS ${(finalStats.rssBytes / 1048576).toFixed(1)} MiB, heap used ${(finalStats.heapUsedBytes / 1048576).toFixed(1)} MiB`] : []),
      ...gateway.stderrLines().slice(0, 8).map((line) => `gateway stderr: ${line}`),
    ]
    return {
      tables: [latencyTable, throughputTable, costTable],
      checks,
      notes,
      data: {
        concurrency1: one,
        concurrencyN: { concurrency: settings.concurrency, ...many },
        addedMs: { p50: addedP50, p99: addedP99 },
        throughputRatio: ratio,
        gatewayMaxLoopDelayMs: Number.isNaN(gatewayStall) ? null : gatewayStall,
        gatewayFinalStats: finalStats ?? null,
        gatewayStderr: gateway.stderrLines(),
        gatewayConfig: gateway.config,
        profiles,
      },
    }
  } finally {
    await Promise.all([sessions.direct?.close(), sessions.gateway?.close()])
  }
}

export const syncCallSection: Section = {
  id: 'sync-call',
  title: 'Synchronous tools/call: direct vs through the gateway',
  run,
}
