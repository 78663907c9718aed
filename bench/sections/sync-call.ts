// Section "sync-call": the demo `echo` tool called on three paths by the same load generator (its own
// process, bench/lib/loadgen.ts): direct on the upstream, through a bare undici forwarder (the floor: the cost
// of one extra hop, no MCP; bench/lib/floors.ts) and through the gateway (`demo__echo`), at concurrency 1
// (added latency) and at BENCH_CONCURRENCY (throughput), the paths taking turns within each round.
// Budgets (design.md §4), ratios to the forwarder of the same run: added p50 ≤ 1.2 × the forwarder's added
// p50, and ≤ 0.25 ms absolute while the forwarder's is under 0.15 ms; throughput at 64 ≥ 95 % of the
// forwarder's; no event-loop stall over 50 ms. The gateway path is measured twice: a 2025-11-25 session, and a
// 2026-07-28 client (no session: envelope and routing headers on every request; the tasks extension not declared,
// so every call is answered synchronously, however long it queues), each held to the budgets.
import { cpus } from 'node:os'
import { startForwarder, type FloorHandle } from '../lib/floors.ts'
import type { GatewayHandle, ProbeStats } from '../lib/gateway.ts'
import { generate, type GeneratedRun, type LoadSpec, type PreparedRequest } from '../lib/loadgen.ts'
import { McpHttpSession } from '../lib/mcp-http.ts'
import { MODERN_VERSION, ModernHttpClient } from '../lib/modern-http.ts'
import { procCpuMs } from '../lib/processes.ts'
import { profiled } from '../lib/tasks.ts'
import { concat, ms, signedMs, summarize, type LatencySummary, type Table } from '../lib/stats.ts'
import type { BenchContext, Check, Section, SectionResult } from '../lib/types.ts'

const ADDED_RATIO_LIMIT = 1.2
const ADDED_P50_LIMIT_MS = 0.25
/** The absolute limit applies while the forwarder adds less than this (a fast enough machine and hour). */
const ABSOLUTE_APPLIES_BELOW_MS = 0.15
const THROUGHPUT_RATIO_LIMIT = 0.95
const LOOP_STALL_LIMIT_MS = 50
const TEXT = 'benchmark payload'
/** Distinct pre-built requests per path (distinct JSON-RPC ids: none is reused while an earlier use may be in flight). */
const PREPARED = 4096
const WARMUP_MS = 1000

const MODERN = `gateway ${MODERN_VERSION}` as const
type PathName = 'direct' | 'forwarder' | 'gateway' | typeof MODERN
const PATHS: readonly PathName[] = ['direct', 'forwarder', 'gateway', MODERN]
/** The gateway paths: through the gateway as a 2025-11-25 session, and as a 2026-07-28 client. */
type GatewayPath = 'gateway' | typeof MODERN
const GATEWAY_PATHS: readonly GatewayPath[] = ['gateway', MODERN]

function isGateway (path: PathName): path is GatewayPath {
  return path === 'gateway' || path === MODERN
}

function totalsByPath (): Record<PathName, PathTotals> {
  return Object.fromEntries(PATHS.map((path) => [path, emptyTotals(path)])) as Record<PathName, PathTotals>
}

/** One path's windows, summed over its rounds. */
interface PathTotals {
  calls: number
  elapsedMs: number
  latencies: Float64Array[]
  clientCpuMs: number
  upstreamCpuMs: number | undefined
  /** The forwarder's or the gateway's CPU; undefined on the direct path or where it cannot be read. */
  hopCpuMs: number | undefined
  gatewayMaxLoopDelayMs: number | undefined
}

function emptyTotals (path: PathName): PathTotals {
  return { calls: 0, elapsedMs: 0, latencies: [], clientCpuMs: 0, upstreamCpuMs: 0, hopCpuMs: path === 'direct' ? undefined : 0, gatewayMaxLoopDelayMs: undefined }
}

function add (a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined || b === undefined ? undefined : a + b
}

function delta (before: number | undefined, after: number | undefined): number | undefined {
  return before === undefined || after === undefined ? undefined : after - before
}

interface PhaseResult {
  latency: LatencySummary
  calls: number
  elapsedMs: number
  callsPerSecond: number
  /** CPU µs per call of the load generator, the upstream, and the hop (forwarder or gateway). */
  cpuUsPerCall: { client: number, upstream: number | undefined, hop: number | undefined }
  /** The load generator's CPU over wall time: 1 = one core fully busy. */
  clientBusy: number
  gatewayMaxLoopDelayMs: number | undefined
}

function phaseResult (totals: PathTotals): PhaseResult {
  const perCall = (cpuMs: number | undefined): number | undefined => cpuMs === undefined ? undefined : cpuMs * 1000 / totals.calls
  return {
    latency: summarize(concat(totals.latencies)),
    calls: totals.calls,
    elapsedMs: totals.elapsedMs,
    callsPerSecond: totals.calls / (totals.elapsedMs / 1000),
    cpuUsPerCall: { client: perCall(totals.clientCpuMs)!, upstream: perCall(totals.upstreamCpuMs), hop: perCall(totals.hopCpuMs) },
    clientBusy: totals.clientCpuMs / totals.elapsedMs,
    gatewayMaxLoopDelayMs: totals.gatewayMaxLoopDelayMs,
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
  const maxCalls = settings.maxConcurrentCalls ?? 16
  const profiles: string[] = []
  let forwarder: FloorHandle | undefined
  const sessions: { direct?: McpHttpSession, gateway?: McpHttpSession, modern?: ModernHttpClient } = {}
  try {
    ctx.log(`sync-call: starting the floor, a bare undici forwarder in front of the upstream (${maxCalls} upstream connections, as the gateway)`)
    forwarder = await startForwarder(ctx.upstream.url, maxCalls)
    sessions.direct = await McpHttpSession.open(ctx.upstream.url, 1)
    sessions.gateway = await McpHttpSession.open(gateway.url, 1)
    sessions.modern = new ModernHttpClient(gateway.url, 1, { tasks: false })
    const build = (session: McpHttpSession | ModernHttpClient, tool: string): PreparedRequest[] =>
      Array.from({ length: PREPARED }, () => session.prepare('tools/call', { name: tool, arguments: { text: TEXT } }))
    const direct = build(sessions.direct, 'echo')
    const forwarderOrigin = new URL(forwarder.url).origin
    // The forwarder carries the direct path's own session and requests: only the hop differs.
    const requests: Record<PathName, PreparedRequest[]> = {
      direct,
      forwarder: direct.map((r) => ({ ...r, origin: forwarderOrigin })),
      gateway: build(sessions.gateway, 'demo__echo'),
      [MODERN]: build(sessions.modern, 'demo__echo'),
    }
    const load = (path: PathName, spec: Omit<LoadSpec, 'requests' | 'expect'>) => (): Promise<GeneratedRun> =>
      generate({ ...spec, requests: requests[path], expect: TEXT })
    const hopCpu = (path: PathName): number | undefined => path === 'forwarder' ? forwarder!.cpuMs() : undefined

    /** One window of `path`, added to `totals`, with the upstream's, the forwarder's and the gateway's CPU. */
    const measure = async (path: PathName, totals: PathTotals, driver: () => Promise<GeneratedRun>): Promise<void> => {
      await gateway.resetStats()
      const upstreamBefore = procCpuMs(ctx.upstream.pid)
      const hopBefore = hopCpu(path)
      const result = await driver()
      const hopAfter = hopCpu(path)
      const upstreamAfter = procCpuMs(ctx.upstream.pid)
      const stats: ProbeStats | undefined = await gateway.readStats()
      totals.calls += result.calls
      totals.elapsedMs += result.elapsedMs
      totals.latencies.push(result.latencies)
      totals.clientCpuMs += result.clientCpuMs
      totals.upstreamCpuMs = add(totals.upstreamCpuMs, delta(upstreamBefore, upstreamAfter))
      if (path === 'forwarder') totals.hopCpuMs = add(totals.hopCpuMs, delta(hopBefore, hopAfter))
      if (isGateway(path)) {
        totals.hopCpuMs = add(totals.hopCpuMs, stats?.cpuMs)
        totals.gatewayMaxLoopDelayMs = stats === undefined ? undefined : Math.max(totals.gatewayMaxLoopDelayMs ?? 0, stats.maxLoopDelayMs)
      }
    }

    ctx.log(`warm-up: ${settings.warmup} calls at concurrency 1, then ${settings.concurrency} workers for ${WARMUP_MS / 1000} s, per path`)
    for (const path of PATHS) {
      await load(path, { concurrency: 1, durationMs: 60_000, maxRequests: settings.warmup })()
      await load(path, { concurrency: settings.concurrency, durationMs: WARMUP_MS })()
    }

    // The gateway is idle outside its own windows, so a profile of a whole phase shows only the gateway path.
    const c1 = totalsByPath()
    const slice = settings.seconds * 1000 / settings.rounds
    const rounds = split(settings.calls, settings.rounds)
    await profiled(ctx, gateway, 'sync-call-c1', profiles, async () => {
      for (const [round, count] of rounds.entries()) {
        for (const path of PATHS) {
          ctx.log(`concurrency 1, round ${round + 1}/${rounds.length}: ${count} calls ${path}`)
          await measure(path, c1[path], load(path, { concurrency: 1, durationMs: 10 * 60_000, maxRequests: count }))
        }
      }
    })
    const cN = totalsByPath()
    await profiled(ctx, gateway, `sync-call-c${settings.concurrency}`, profiles, async () => {
      for (let round = 0; round < settings.rounds; round++) {
        for (const path of PATHS) {
          ctx.log(`concurrency ${settings.concurrency}, round ${round + 1}/${settings.rounds}: ${(slice / 1000).toFixed(1)} s ${path}`)
          await measure(path, cN[path], load(path, { concurrency: settings.concurrency, durationMs: slice }))
        }
      }
    })
    const finalStats = await gateway.readStats({ gc: true })
    const results = (totals: Record<PathName, PathTotals>): Record<PathName, PhaseResult> =>
      Object.fromEntries(PATHS.map((path) => [path, phaseResult(totals[path])])) as Record<PathName, PhaseResult>
    const one = results(c1)
    const many = results(cN)
    return report(ctx, { one, many, gateway, forwarder, finalStats, profiles, maxCalls })
  } finally {
    await Promise.all([sessions.direct?.close(), sessions.gateway?.close(), sessions.modern?.close()])
    await forwarder?.close()
  }
}

interface Measured {
  one: Record<PathName, PhaseResult>
  many: Record<PathName, PhaseResult>
  gateway: GatewayHandle
  forwarder: FloorHandle
  finalStats: ProbeStats | undefined
  profiles: string[]
  maxCalls: number
}

function report (ctx: BenchContext, m: Measured): SectionResult {
  const { settings } = ctx
  const { one, many, gateway } = m
  const added = (path: PathName, key: 'p50' | 'p90' | 'p99' | 'mean'): number => one[path].latency[key] - one.direct.latency[key]
  const forwarderAdded = added('forwarder', 'p50')
  const ratiosOf = (path: GatewayPath): { addedP50: number, throughputToForwarder: number, throughputToDirect: number } => ({
    addedP50: forwarderAdded > 0 ? added(path, 'p50') / forwarderAdded : Number.NaN,
    throughputToForwarder: many[path].callsPerSecond / many.forwarder.callsPerSecond,
    throughputToDirect: many[path].callsPerSecond / many.direct.callsPerSecond,
  })
  const stall = settings.gatewayMode === 'child'
    ? Math.max(...GATEWAY_PATHS.flatMap((path) => [one[path], many[path]].map((p) => p.gatewayMaxLoopDelayMs ?? Number.NaN)))
    : Number.NaN

  const latencyTable: Table = {
    title: `tools/call echo, concurrency 1 (${one.direct.calls} calls per path, load generator in its own process, ms)`,
    head: ['path', 'p50', 'p90', 'p99', 'mean', 'max', 'calls/s', 'added p50', 'added p99'],
    rows: PATHS.map((path) => {
      const l = one[path].latency
      return [path, ms(l.p50), ms(l.p90), ms(l.p99), ms(l.mean), ms(l.max), one[path].callsPerSecond.toFixed(0),
        path === 'direct' ? '' : signedMs(added(path, 'p50')), path === 'direct' ? '' : signedMs(added(path, 'p99'))]
    }),
  }
  const throughputTable: Table = {
    title: `tools/call echo, concurrency ${settings.concurrency} (${settings.seconds} s per path, one client per path)`,
    head: ['path', 'calls', 'calls/s', 'of forwarder', 'of direct', 'p50 ms', 'p99 ms', 'max ms'],
    rows: PATHS.map((path) => {
      const p = many[path]
      return [path, String(p.calls), p.callsPerSecond.toFixed(0), `${(p.callsPerSecond / many.forwarder.callsPerSecond * 100).toFixed(1)} %`,
        `${(p.callsPerSecond / many.direct.callsPerSecond * 100).toFixed(1)} %`, ms(p.latency.p50), ms(p.latency.p99), ms(p.latency.max)]
    }),
  }
  const costTable: Table = {
    title: 'CPU µs per call by process, the load generator\'s share of a core, and the gateway\'s worst event-loop delay (ms)',
    head: ['phase / path', 'load generator µs', 'hop µs (forwarder / gateway)', 'upstream µs', 'load generator busy', 'gateway loop max'],
    rows: (['c1', 'cN'] as const).flatMap((phase) => PATHS.map((path) => {
      const p = (phase === 'c1' ? one : many)[path]
      return [`${phase === 'c1' ? 'c=1' : `c=${settings.concurrency}`} ${path}`, us(p.cpuUsPerCall.client), us(p.cpuUsPerCall.hop),
        us(p.cpuUsPerCall.upstream), `${(p.clientBusy * 100).toFixed(0)} %`, isGateway(path) ? ms(p.gatewayMaxLoopDelayMs, 1) : '—']
    })),
  }

  const absoluteApplies = forwarderAdded < ABSOLUTE_APPLIES_BELOW_MS
  const checks: Check[] = GATEWAY_PATHS.flatMap((path): Check[] => {
    const { addedP50: addedRatio, throughputToForwarder: throughputRatio } = ratiosOf(path)
    const gatewayAdded = added(path, 'p50')
    const dialect = path === MODERN ? `, ${MODERN_VERSION}` : ''
    return [
      {
        budget: `added p50 latency, concurrency 1${dialect}`,
        limit: `≤ ${ADDED_RATIO_LIMIT} × the forwarder's`,
        measured: `${Number.isNaN(addedRatio) ? 'n/a' : `${addedRatio.toFixed(2)} ×`} (gateway ${signedMs(gatewayAdded)} ms vs forwarder ${signedMs(forwarderAdded)} ms)`,
        pass: Number.isNaN(addedRatio) ? undefined : addedRatio <= ADDED_RATIO_LIMIT,
      },
      {
        budget: `added p50 latency, absolute${dialect} (while the forwarder adds < ${ABSOLUTE_APPLIES_BELOW_MS} ms)`,
        limit: `≤ ${ADDED_P50_LIMIT_MS} ms`,
        measured: `${signedMs(gatewayAdded)} ms${absoluteApplies ? '' : ` (forwarder adds ${signedMs(forwarderAdded)} ms: does not apply)`}`,
        pass: absoluteApplies ? gatewayAdded <= ADDED_P50_LIMIT_MS : undefined,
      },
      {
        budget: `throughput at concurrency ${settings.concurrency}${dialect}${settings.concurrency === 64 ? '' : ' (budget is stated for 64)'}`,
        limit: `≥ ${THROUGHPUT_RATIO_LIMIT * 100} % of the forwarder's`,
        measured: `${(throughputRatio * 100).toFixed(1)} % (gateway ${many[path].callsPerSecond.toFixed(0)}/s vs forwarder ${many.forwarder.callsPerSecond.toFixed(0)}/s)`,
        pass: throughputRatio >= THROUGHPUT_RATIO_LIMIT,
      },
    ]
  })
  checks.push(
    {
      budget: 'event-loop stall in the gateway process, sync tools/call',
      limit: `≤ ${LOOP_STALL_LIMIT_MS} ms`,
      measured: Number.isNaN(stall) ? 'n/a' : `${stall.toFixed(1)} ms`,
      pass: Number.isNaN(stall) ? undefined : stall <= LOOP_STALL_LIMIT_MS,
    },
  )

  const notes = [
    `floor: a bare HTTP forwarder on undici (own process, a keep-alive pool of ${m.maxCalls} upstream connections, as many as the gateway's maxConcurrentCalls) ` +
      'streaming each request to the upstream and the answer back; it carries the direct path\'s session and requests, so only the hop differs',
    settings.gatewayMode === 'child'
      ? 'gateway: separate process (node dist/main.js); its loop delay comes from a probe preloaded into it'
      : 'gateway: in-process, sharing the bench process (the load generator has its own process either way); its loop is not watched',
    `at concurrency ${settings.concurrency}, the gateway and the forwarder each hold at most ${m.maxCalls} upstream connections; the other calls queue in them`,
    `${cpus().length} CPU cores shared by the load generator, the upstream and the hop: the forwarder and gateway paths run three busy processes where the direct path runs two`,
    `${MODERN}: the same gateway through a ${MODERN_VERSION} client (no session; envelope, Mcp-Method and Mcp-Name on every request; ` +
      'without the tasks extension, so no call becomes a task)',
    ...(many.forwarder.clientBusy >= 0.9 ? ['the load generator is saturated on the forwarder path: the floor is client-bound, so the throughput ratio is too generous to the gateway'] : []),
    ...m.profiles.map((file) => `gateway CPU profile (numbers above are perturbed by profiling): ${file} — summarise with: npx tsx bench/tools/cpuprofile-top.ts ${file}`),
    ...(m.finalStats ? [`gateway after the run and a full GC: RSS ${(m.finalStats.rssBytes / 1048576).toFixed(1)} MiB, heap used ${(m.finalStats.heapUsedBytes / 1048576).toFixed(1)} MiB`] : []),
    ...gateway.stderrLines().slice(0, 8).map((line) => `gateway stderr: ${line}`),
  ]
  return {
    tables: [latencyTable, throughputTable, costTable],
    checks,
    notes,
    data: {
      floor: { kind: 'undici forwarder', upstreamConnections: m.maxCalls },
      concurrency1: one,
      concurrencyN: { concurrency: settings.concurrency, ...many },
      addedMs: Object.fromEntries((['forwarder', ...GATEWAY_PATHS] as const).map((path) => [path, { p50: added(path, 'p50'), p99: added(path, 'p99') }])),
      /** Per gateway path (2025-11-25 session, 2026-07-28 client); addedP50 is null when the forwarder added nothing. */
      ratios: Object.fromEntries(GATEWAY_PATHS.map((path) => {
        const r = ratiosOf(path)
        return [path, { ...r, addedP50: Number.isNaN(r.addedP50) ? null : r.addedP50 }]
      })),
      limits: {
        addedRatio: ADDED_RATIO_LIMIT,
        addedP50Ms: ADDED_P50_LIMIT_MS,
        absoluteAppliesBelowMs: ABSOLUTE_APPLIES_BELOW_MS,
        throughputRatio: THROUGHPUT_RATIO_LIMIT,
      },
      gatewayMaxLoopDelayMs: Number.isNaN(stall) ? null : stall,
      gatewayFinalStats: m.finalStats ?? null,
      gatewayStderr: gateway.stderrLines(),
      gatewayConfig: gateway.config,
      profiles: m.profiles,
    },
  }
}

export const syncCallSection: Section = {
  id: 'sync-call',
  title: 'Synchronous tools/call: direct, through a bare forwarder, and through the gateway (a 2025-11-25 session and a 2026-07-28 client)',
  run,
}
