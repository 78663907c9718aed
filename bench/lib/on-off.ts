// What sections that weigh one feature of the gateway share: two gateways in front of the same upstream, one
// with the feature on and one with it off, each measured for synchronous tools/call (demo echo) and tasks/get
// at BENCH_CONCURRENCY workers, in rounds of BENCH_SECONDS / BENCH_ROUNDS each that take turns so that drift of
// the machine spreads over them. A third gateway, the same as the one with the feature off, is measured the same
// way: how far two identical gateways differ (the A/A spread) is the noise a cost must stand out of.
import { concurrent } from './load.ts'
import { McpHttpSession } from './mcp-http.ts'
import { concat, ms, summarize } from './stats.ts'
import { createTasks, measureWindow, perCallUs, totalsOf, us, type Window } from './tasks.ts'
import type { GatewayHandle, GatewayOptions } from './gateway.ts'
import type { BenchContext } from './types.ts'

const WARMUP_MS = 1000
const TASK_IDS = 100
const TEXT = 'benchmark payload'

export type Mode = 'on' | 'off' | 'off again'
export type Workload = 'sync-call' | 'tasks/get'
const MODES: readonly Mode[] = ['on', 'off', 'off again']
export const WORKLOADS: readonly Workload[] = ['sync-call', 'tasks/get']

interface Side {
  mode: Mode
  gateway: GatewayHandle
  session: McpHttpSession
  ids: string[]
}

export interface OnOffOptions {
  /** The section's id, for the progress lines. */
  section: string
  /** What is turned on and off, for the progress lines and the table. */
  feature: string
  /** The options (beyond the store, limits and slots the comparison sets) of the gateway in each mode. */
  gateway (mode: 'on' | 'off'): Pick<GatewayOptions, 'metrics' | 'tracing'>
  /** Runs after the measurement with the gateway that has the feature on, while both still run. */
  measured? (on: GatewayHandle): Promise<void>
}

export interface OnOffResult {
  workers: number
  /** Table rows: workload, mode, requests, requests/s, p50 ms, p99 ms, gateway µs/request. */
  rows: string[][]
  /** Throughput with the feature on ÷ throughput with it off, per workload. */
  ratio: Record<Workload, number>
  /** Throughput of the second gateway with the feature off ÷ the first's: 1 but for the noise of the machine. */
  spread: Record<Workload, number>
  data: Record<string, unknown>
}

export const ON_OFF_HEAD = ['workload', 'feature', 'requests', 'requests/s', 'p50 ms', 'p99 ms', 'gateway µs/request']

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

/** Measures both gateways, closes them (the one with the feature on last) and sums up each workload. */
export async function compareOnOff (ctx: BenchContext, options: OnOffOptions): Promise<OnOffResult> {
  const { settings } = ctx
  const workers = settings.concurrency
  const sides: Side[] = []
  const windows = new Map<string, Window[]>()
  const key = (mode: Mode, workload: Workload): string => `${mode} ${workload}`
  try {
    for (const mode of MODES) {
      const gateway = await ctx.startGateway({
        store: 'memory',
        ...options.gateway(mode === 'on' ? 'on' : 'off'),
        tasks: { maxActivePerPrincipal: 10 * TASK_IDS },
        // The tasks hold call slots for their whole (hour-long) run: the sync calls need slots of their own.
        upstream: { maxConcurrentCalls: TASK_IDS + 2 * workers, maxQueuedCalls: 10 * TASK_IDS },
        server: { shutdownGrace: 0 },
      })
      const session = await McpHttpSession.open(gateway.url, workers)
      sides.push({ mode, gateway, session, ids: await createTasks(session, TASK_IDS, 16) })
    }
    const slice = settings.seconds * 1000 / settings.rounds
    for (const workload of WORKLOADS) {
      for (const side of sides) {
        ctx.log(`${options.section} warm-up: ${workload}, ${options.feature} ${side.mode}, ${WARMUP_MS / 1000} s`)
        await concurrent(driver(side, workload), workers, WARMUP_MS)
      }
      for (let round = 0; round < settings.rounds; round++) {
        // Each round another side goes first, so none always runs on the warmer machine.
        const order = [...sides.slice(round % sides.length), ...sides.slice(0, round % sides.length)]
        for (const side of order) {
          ctx.log(`${options.section} round ${round + 1}/${settings.rounds}: ${workload}, ${options.feature} ${side.mode}, ${workers} workers for ${(slice / 1000).toFixed(1)} s`)
          const window = await measureWindow(ctx, side.gateway, () => concurrent(driver(side, workload), workers, slice))
          windows.set(key(side.mode, workload), [...windows.get(key(side.mode, workload)) ?? [], window])
        }
      }
    }
    await options.measured?.(sides[0]!.gateway)
  } finally {
    for (const side of [...sides].reverse()) {
      await side.session.close()
      await side.gateway.close()
    }
  }

  const rows: string[][] = []
  const data: Record<string, unknown> = { workers }
  const ratio = {} as Record<Workload, number>
  const spread = {} as Record<Workload, number>
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
    ratio[workload] = rate.on! / rate.off!
    spread[workload] = rate['off again']! / rate.off!
  }
  return { workers, rows, ratio, spread, data }
}
