// Section "metrics-cost": what keeping Prometheus metrics costs. Two gateways in front of the same upstream,
// one with metrics on (served at /metrics on the main listener) and one with metrics off, each measured for
// synchronous tools/call (demo echo) and tasks/get at BENCH_CONCURRENCY workers, in alternating rounds of
// BENCH_SECONDS / BENCH_ROUNDS each so that drift of the machine spreads over both.
// Budget (issue 13): metrics cost under 5 % of throughput, for each of the two workloads.
import { request } from 'undici'
import { concurrent } from '../lib/load.ts'
import { McpHttpSession } from '../lib/mcp-http.ts'
import { concat, ms, summarize, type Table } from '../lib/stats.ts'
import { createTasks, measureWindow, perCallUs, totalsOf, us, type Window } from '../lib/tasks.ts'
import type { GatewayHandle } from '../lib/gateway.ts'
import type { BenchContext, Check, Section, SectionResult } from '../lib/types.ts'

const COST_LIMIT = 0.05
const WARMUP_MS = 1000
const TASK_IDS = 100
const TEXT = 'benchmark payload'

type Mode = 'on' | 'off'
type Workload = 'sync-call' | 'tasks/get'
const MODES: readonly Mode[] = ['on', 'off']
const WORKLOADS: readonly Workload[] = ['sync-call', 'tasks/get']

interface Side {
  mode: Mode
  gateway: GatewayHandle
  session: McpHttpSession
  ids: string[]
}

/** One request of `workload` on `side` (tasks/get: round robin over its task ids, all still working). */
function driver (side: Side, workload: Workload): () => Promise<void> {
  if (workload === 'sync-call') return () => side.session.echo('demo__echo', TEXT)
  let next = 0
  return async () => {
    const id = side.ids[next++ % side.ids.length]!
    const status = await side.session.getTask(id)
    if (status !== 'working') throw new Error(`tasks/get ${id}: ${status}, expected working`)
  }
}

/** The size of the metrics page of the gateway with metrics on: proof that it was collecting while measured. */
async function scrapeBytes (gateway: GatewayHandle): Promise<number> {
  const res = await request(gateway.url.replace(/\/mcp$/, '/metrics'))
  const text = await res.body.text()
  if (res.statusCode !== 200 || !text.includes('gateway_request_duration_seconds_count')) throw new Error(`/metrics answered ${res.statusCode} without the request metrics`)
  return text.length
}

async function run (ctx: BenchContext): Promise<SectionResult> {
  const { settings } = ctx
  const workers = settings.concurrency
  const sides: Side[] = []
  try {
    for (const mode of MODES) {
      const gateway = await ctx.startGateway({
        store: 'memory',
        metrics: mode === 'on' ? { enabled: true, listener: 'main' } : { enabled: false },
        tasks: { maxActivePerPrincipal: 10 * TASK_IDS },
        // The tasks hold call slots for their whole (hour-long) run: the sync calls need slots of their own.
        upstream: { maxConcurrentCalls: TASK_IDS + 2 * workers, maxQueuedCalls: 10 * TASK_IDS },
        server: { shutdownGrace: 0 },
      })
      const session = await McpHttpSession.open(gateway.url, workers)
      sides.push({ mode, gateway, session, ids: await createTasks(session, TASK_IDS, 16) })
    }
    const windows = new Map<string, Window[]>()
    const key = (mode: Mode, workload: Workload): string => `${mode} ${workload}`
    const slice = settings.seconds * 1000 / settings.rounds
    for (const workload of WORKLOADS) {
      for (const side of sides) {
        ctx.log(`metrics-cost warm-up: ${workload}, metrics ${side.mode}, ${WARMUP_MS / 1000} s`)
        await concurrent(driver(side, workload), workers, WARMUP_MS)
      }
      for (let round = 0; round < settings.rounds; round++) {
        // Alternate which side goes first, so neither always runs on the warmer machine.
        const order = round % 2 === 0 ? sides : [...sides].reverse()
        for (const side of order) {
          ctx.log(`metrics-cost round ${round + 1}/${settings.rounds}: ${workload}, metrics ${side.mode}, ${workers} workers for ${(slice / 1000).toFixed(1)} s`)
          const window = await measureWindow(ctx, side.gateway, () => concurrent(driver(side, workload), workers, slice))
          windows.set(key(side.mode, workload), [...windows.get(key(side.mode, workload)) ?? [], window])
        }
      }
    }
    const metricsBytes = await scrapeBytes(sides[0]!.gateway)

    const rows: string[][] = []
    const checks: Check[] = []
    const data: Record<string, unknown> = { workers, metricsBytes }
    for (const workload of WORKLOADS) {
      const rate: Partial<Record<Mode, number>> = {}
      for (const mode of MODES) {
        const t = totalsOf(windows.get(key(mode, workload))!)
        const latency = summarize(concat(t.latencies))
        rate[mode] = t.calls / (t.elapsedMs / 1000)
        const gatewayUs = perCallUs(t.gatewayCpuMs, t.calls)
        rows.push([workload, mode, String(t.calls), rate[mode].toFixed(0), ms(latency.p50), ms(latency.p99), us(gatewayUs)])
        data[key(mode, workload)] = { requests: t.calls, requestsPerSecond: rate[mode], latency, gatewayCpuUsPerRequest: gatewayUs }
      }
      const cost = 1 - rate.on! / rate.off!
      data[`${workload} cost`] = cost
      checks.push({
        budget: `metrics cost, ${workload} throughput (${workers} workers)`,
        limit: `< ${COST_LIMIT * 100} %`,
        measured: `${(cost * 100).toFixed(1)} %`,
        pass: cost < COST_LIMIT,
      })
    }
    const table: Table = {
      title: `metrics on vs off, ${workers} workers, ${settings.seconds} s per gateway and workload in ${settings.rounds} alternating rounds`,
      head: ['workload', 'metrics', 'requests', 'requests/s', 'p50 ms', 'p99 ms', 'gateway µs/request'],
      rows,
    }
    return {
      tables: [table],
      checks,
      notes: [
        'cost = 1 − (requests/s with metrics on ÷ requests/s with metrics off); negative when the run with metrics on happened to be faster (noise of the machine)',
        `the gateway with metrics on served a ${metricsBytes}-byte /metrics page after the run`,
      ],
      data,
    }
  } finally {
    for (const side of sides) {
      await side.session.close()
      await side.gateway.close()
    }
  }
}

export const metricsCostSection: Section = {
  id: 'metrics-cost',
  title: 'cost of Prometheus metrics: sync tools/call and tasks/get with metrics on vs off',
  run,
}
