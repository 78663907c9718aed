import { Histogram, Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { BucketHistogram } from '../../src/observability/bucket-histogram.ts'

const BUCKETS = [0.001, 0.01, 0.1, 1]
const OBSERVATIONS: Array<[string, string, number]> = [
  ['tools/call', 'ok', 0.0005], ['tools/call', 'ok', 0.001], ['tools/call', 'ok', 0.05], ['tools/call', 'error', 3],
  ['tasks/get', 'ok', 0.002], ['tasks/get', 'ok', 0.1], ['tasks/get', 'ok', 1.5],
]

describe('BucketHistogram', () => {
  it('exposes exactly what prom-client\'s own histogram exposes for the same observations', async () => {
    const ours = new Registry()
    const reference = new Registry()
    const fast = new BucketHistogram({ name: 'h_seconds', help: 'latency', labelNames: ['method', 'outcome'], buckets: BUCKETS, registers: [ours] })
    const plain = new Histogram({ name: 'h_seconds', help: 'latency', labelNames: ['method', 'outcome'], buckets: BUCKETS, registers: [reference] })
    for (const [method, outcome, value] of OBSERVATIONS) {
      fast.series(method, outcome).observe(value)
      plain.observe({ method, outcome }, value)
    }
    expect(await ours.metrics()).toBe(await reference.metrics())
    // The JSON form too (prom-client's own samples also carry an exemplar slot, null without exemplars).
    const withoutExemplars = (metrics: Awaited<ReturnType<Registry['getMetricsAsJSON']>>): unknown =>
      metrics.map((metric) => ({
        ...metric,
        values: metric.values.map((sample) => ({
          labels: sample.labels,
          value: sample.value,
          metricName: (sample as { metricName?: string }).metricName,
        })),
      }))
    expect(withoutExemplars(await ours.getMetricsAsJSON())).toEqual(withoutExemplars(await reference.getMetricsAsJSON()))
  })

  it('refuses a label set of the wrong size instead of exposing a malformed series', () => {
    const fast = new BucketHistogram({ name: 'h_seconds', help: 'latency', labelNames: ['method'], buckets: BUCKETS, registers: [] })
    expect(() => fast.series('a', 'b')).toThrow(/expected 1 label values, got 2/)
  })
})
