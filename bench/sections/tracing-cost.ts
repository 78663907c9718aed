// Section "tracing-cost": what recording OpenTelemetry traces costs. Two gateways in front of the same
// upstream, both with metrics on (served at /metrics on the main listener); one also traces every request
// (sampleRatio 1: a server span per request, a client span per upstream request) and exports the spans as
// OTLP/HTTP JSON to a collector stub in the bench process on loopback, the other has tracing off; compared
// as bench/lib/on-off.ts does (sync tools/call and tasks/get, rounds taking turns, the A/A spread beside the cost).
// No budget in the design: the ratio of throughputs (on ÷ off) and the latencies are reported.
import { once } from 'node:events'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { compareOnOff, ON_OFF_HEAD, WORKLOADS } from '../lib/on-off.ts'
import type { BenchContext, Section, SectionResult } from '../lib/types.ts'

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

async function run (ctx: BenchContext): Promise<SectionResult> {
  const { settings } = ctx
  const collector = new CollectorStub()
  const endpoint = await collector.listen()
  try {
    const { workers, rows, ratio, spread, data } = await compareOnOff(ctx, {
      section: 'tracing-cost',
      feature: 'tracing',
      gateway: (mode) => ({
        metrics: { enabled: true, listener: 'main' },
        // The exporter's defaults (5 s delay, 512 spans a batch, 2048 queued) would drop spans at these rates.
        tracing: mode === 'on' ? { enabled: true, endpoint, sampleRatio: 1, batchDelay: '200ms', maxBatchSize: 2048, maxQueueSize: 65_536 } : { enabled: false },
      }),
    })
    const ratios = WORKLOADS.map((workload) => {
      data[`${workload} ratio`] = ratio[workload]
      return `${workload}: throughput with tracing on is ${(ratio[workload] * 100).toFixed(1)} % of tracing off (cost ${((1 - ratio[workload]) * 100).toFixed(1)} %; A/A spread of two gateways with tracing off ${((1 - spread[workload]) * 100).toFixed(1)} %)`
    })
    // The gateway sends its last spans as it closes: the counts below are all it exported.
    Object.assign(data, { exports: collector.exports, exportedBytes: collector.bytes, exportedSpans: collector.spans })
    return {
      tables: [{
        title: `tracing on (sampling 100 %, OTLP/HTTP JSON to a loopback collector) vs off, metrics on in both, ${workers} workers, ${settings.seconds} s per gateway and workload in ${settings.rounds} rounds taking turns`,
        head: ON_OFF_HEAD.map((name) => name === 'feature' ? 'tracing' : name),
        rows,
      }],
      checks: [],
      notes: [
        ...ratios,
        `the gateway with tracing on exported ${collector.spans} spans in ${collector.exports} requests (${collector.bytes} bytes), warm-up and task creation included`,
      ],
      data,
    }
  } finally {
    await collector.close()
  }
}

export const tracingCostSection: Section = {
  id: 'tracing-cost',
  title: 'cost of OpenTelemetry tracing: sync tools/call and tasks/get with metrics on, tracing on vs off',
  run,
}
