// Section "tracing-cost": what recording OpenTelemetry traces costs. Two gateways in front of the same
// upstream, both with metrics on (served at /metrics on the main listener); one also traces every request
// (sampleRatio 1: a server span per request, a client span per upstream request) and exports the spans as
// OTLP/HTTP JSON to a collector stub in the bench process on loopback, the other has tracing off. Each is
// measured for synchronous tools/call (demo echo) and tasks/get at BENCH_CONCURRENCY workers, in alternating
// rounds of BENCH_SECONDS / BENCH_ROUNDS each so that drift of the machine spreads over both.
// No budget in the design: the ratio of throughputs (on ÷ off) and the latencies are reported.
import { once } from 'node:events'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { concurrent } from '../lib/load.ts'
import { McpHttpSession } from '../lib/mcp-http.ts'
import { concat, ms, summarize, type Table } from '../lib/stats.ts'
import { createTasks, measureWindow, perCallUs, totalsOf, us, type Window } from '../lib/tasks.ts'
import type { GatewayHandle } from '../lib/gateway.ts'
import type { BenchContext, Section, SectionResult } from '../lib/types.ts'

const WARMUP_MS = 1000
const TASK_IDS = 100
const TEXT = 'benchmark payload'

type Mode = 'off' | 'on'
type Workload = 'sync-call' | 'tasks/get'
const MODES: readonly Mode[] = ['off', 'on']
const WORKLOADS: readonly Workload[] = ['sync-call', 'tasks/get']

interface Side {
  mode: Mode
  gateway: GatewayHandle
  session: McpHttpSession
  ids: string[]
}

/**
 * A collector stub: accepts OTLP/HTTP export requests and counts them, their bytes and their spans (by
 * their `spanId` keys, without parsing), so that the bench process spends next to nothing on them.
 */
class CollectorStub {
  exports = 0
  bytes = 0
  spans = 0
  readonly #server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('latin1')
      this.exports++
      this.bytes += body.length
      for (let at = body.indexOf('"spanId"'); at >= 0; at = body.indexOf('"spanId"', at + 8)) this.spans++
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })

  async listen (): Promise<string> {
    this.#server.listen(0, '127.0.0.1')
    await once(this.#server, 'listening')
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/v1/traces`
  }

  async close (): Promise<void> {
    this.#server.closeAllConnections()
    this.#server.close()
    await once(this.#server, 'close')
  }
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

async function run (ctx: BenchContext): Promise<SectionResult> {
  const { settings } = ctx
  const workers = settings.concurrency
  const collector = new CollectorStub()
  const endpoint = await collector.listen()
  const sides: Side[] = []
  try {
    for (const mode of MODES) {
      const gateway = await ctx.startGateway({
        store: 'memory',
        metrics: { enabled: true, listener: 'main' },
        // The exporter's defaults (5 s delay, 512 spans a batch, 2048 queued) would drop spans at these rates.
        tracing: mode === 'on' ? { enabled: true, endpoint, sampleRatio: 1, batchDelay: '200ms', maxBatchSize: 2048, maxQueueSize: 65_536 } : { enabled: false },
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
        ctx.log(`tracing-cost warm-up: ${workload}, tracing ${side.mode}, ${WARMUP_MS / 1000} s`)
        await concurrent(driver(side, workload), workers, WARMUP_MS)
      }
      for (let round = 0; round < settings.rounds; round++) {
        // Alternate which side goes first, so neither always runs on the warmer machine.
        const order = round % 2 === 0 ? sides : [...sides].reverse()
        for (const side of order) {
          ctx.log(`tracing-cost round ${round + 1}/${settings.rounds}: ${workload}, tracing ${side.mode}, ${workers} workers for ${(slice / 1000).toFixed(1)} s`)
          const window = await measureWindow(ctx, side.gateway, () => concurrent(driver(side, workload), workers, slice))
          windows.set(key(side.mode, workload), [...windows.get(key(side.mode, workload)) ?? [], window])
        }
      }
    }

    const rows: string[][] = []
    const data: Record<string, unknown> = { workers }
    const ratios: string[] = []
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
      const ratio = rate.on! / rate.off!
      data[`${workload} ratio`] = ratio
      ratios.push(`${workload}: throughput with tracing on is ${(ratio * 100).toFixed(1)} % of tracing off (cost ${((1 - ratio) * 100).toFixed(1)} %)`)
    }
    await sides[1]!.session.close()
    await sides[1]!.gateway.close()
    // The gateway sends its last spans as it closes: the counts below are all it exported.
    Object.assign(data, { exports: collector.exports, exportedBytes: collector.bytes, exportedSpans: collector.spans })
    const table: Table = {
      title: `tracing on (sampling 100 %, OTLP/HTTP JSON to a loopback collector) vs off, metrics on in both, ${workers} workers, ${settings.seconds} s per gateway and workload in ${settings.rounds} alternating rounds`,
      head: ['workload', 'tracing', 'requests', 'requests/s', 'p50 ms', 'p99 ms', 'gateway µs/request'],
      rows,
    }
    return {
      tables: [table],
      checks: [],
      notes: [
        ...ratios,
        `the gateway with tracing on exported ${collector.spans} spans in ${collector.exports} requests (${collector.bytes} bytes), warm-up and task creation included`,
      ],
      data,
    }
  } finally {
    for (const side of sides) {
      await side.session.close().catch(() => {})
      await side.gateway.close()
    }
    await collector.close()
  }
}

export const tracingCostSection: Section = {
  id: 'tracing-cost',
  title: 'cost of OpenTelemetry tracing: sync tools/call and tasks/get with metrics on, tracing on vs off',
  run,
}
