// Section "metrics-cost": what keeping Prometheus metrics costs. Gateways in front of the same upstream, one
// with metrics on (served at /metrics on the main listener) and two with metrics off, compared as
// bench/lib/on-off.ts does (sync tools/call and tasks/get, rounds taking turns, the A/A spread beside the cost).
// Budget (issue 13): metrics cost under 5 % of throughput, for each of the two workloads.
import { request } from 'undici'
import { compareOnOff, ON_OFF_HEAD, WORKLOADS } from '../lib/on-off.ts'
import type { GatewayHandle } from '../lib/gateway.ts'
import type { BenchContext, Section, SectionResult } from '../lib/types.ts'

const COST_LIMIT = 0.05

/** The size of the metrics page of the gateway with metrics on: proof that it was collecting while measured. */
async function scrapeBytes (gateway: GatewayHandle): Promise<number> {
  const res = await request(gateway.url.replace(/\/mcp$/, '/metrics'))
  const text = await res.body.text()
  if (res.statusCode !== 200 || !text.includes('gateway_request_duration_seconds_count')) throw new Error(`/metrics answered ${res.statusCode} without the request metrics`)
  return text.length
}

async function run (ctx: BenchContext): Promise<SectionResult> {
  const { settings } = ctx
  let metricsBytes = 0
  const { workers, rows, ratio, spread, data } = await compareOnOff(ctx, {
    section: 'metrics-cost',
    feature: 'metrics',
    gateway: (mode) => ({ metrics: mode === 'on' ? { enabled: true, listener: 'main' } : { enabled: false } }),
    measured: async (on) => { metricsBytes = await scrapeBytes(on) },
  })
  const checks = WORKLOADS.map((workload) => {
    const cost = 1 - ratio[workload]
    data[`${workload} cost`] = cost
    data[`${workload} A/A spread`] = 1 - spread[workload]
    return {
      budget: `metrics cost, ${workload} throughput (${workers} workers)`,
      limit: `< ${COST_LIMIT * 100} %`,
      measured: `${(cost * 100).toFixed(1)} %`,
      pass: cost < COST_LIMIT,
    }
  })
  return {
    tables: [{
      title: `metrics on vs off (and a second gateway with metrics off), ${workers} workers, ${settings.seconds} s per gateway and workload in ${settings.rounds} rounds taking turns`,
      head: ON_OFF_HEAD.map((name) => name === 'feature' ? 'metrics' : name),
      rows,
    }],
    checks,
    notes: [
      'cost = 1 − (requests/s with metrics on ÷ requests/s with metrics off); negative when the run with metrics on happened to be faster (noise of the machine)',
      ...WORKLOADS.map((workload) => `${workload}: A/A spread (two gateways with metrics off) ${((1 - spread[workload]) * 100).toFixed(1)} %: a cost within it cannot be told from noise`),
      `the gateway with metrics on served a ${metricsBytes}-byte /metrics page after the run`,
    ],
    data: { ...data, metricsBytes },
  }
}

export const metricsCostSection: Section = {
  id: 'metrics-cost',
  title: 'cost of Prometheus metrics: sync tools/call and tasks/get with metrics on vs off',
  run,
}
