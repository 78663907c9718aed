import { Histogram, type Registry } from 'prom-client'

type Labels = Record<string, string>

interface Sample {
  metricName: string
  labels: Record<string, string | number>
  /** The series' labels, which prom-client writes after `labels` (the bucket's `le`) and `get()` merges into them. */
  sharedLabels: Record<string, string>
  value: number
}

/** The shape prom-client's registry formats (`getForPromString` of its own metrics). */
interface Exposition {
  name: string
  help: string
  type: 'histogram'
  values: Sample[]
  aggregator: 'sum'
}

/** One label set of a BucketHistogram: what the hot path holds and observes into. */
export interface HistogramSeries {
  observe (value: number): void
}

class Series implements HistogramSeries {
  readonly labels: Labels
  readonly counts: Float64Array
  sum = 0
  count = 0
  readonly #bounds: readonly number[]

  constructor (labels: Labels, bounds: readonly number[]) {
    this.labels = labels
    this.#bounds = bounds
    this.counts = new Float64Array(bounds.length)
  }

  observe (value: number): void {
    const bounds = this.#bounds
    let i = 0
    while (i < bounds.length && value > bounds[i]!) i++
    if (i < bounds.length) this.counts[i]!++
    this.sum += value
    this.count++
  }
}

/**
 * A Prometheus histogram whose observations cost a few additions. prom-client's own histogram validates and
 * hashes the label set on every observation, even through a bound child; here each label set is a series
 * object made once and held by the caller, and the exposition is built from the series at scrape time.
 */
export class BucketHistogram extends Histogram {
  readonly #name: string
  readonly #help: string
  readonly #bounds: readonly number[]
  readonly #labelNames: readonly string[]
  readonly #series = new Map<string, Series>()

  constructor (configuration: { name: string, help: string, labelNames?: readonly string[], buckets: number[], registers: Registry[] }) {
    const { name, help, labelNames = [], buckets, registers } = configuration
    super({ name, help, labelNames, buckets, registers })
    this.#name = name
    this.#help = help
    this.#bounds = [...configuration.buckets].sort((a, b) => a - b)
    this.#labelNames = configuration.labelNames ?? []
  }

  /** The series of the label values `values` (in labelNames order), made on first use and kept. */
  series (...values: string[]): HistogramSeries {
    const key = values.join('\u0000')
    let series = this.#series.get(key)
    if (series === undefined) {
      if (values.length !== this.#labelNames.length) throw new TypeError(`${this.#name}: expected ${this.#labelNames.length} label values, got ${values.length}`)
      series = new Series(Object.fromEntries(this.#labelNames.map((name, i) => [name, values[i]!])), this.#bounds)
      this.#series.set(key, series)
    }
    return series
  }

  /**
   * What prom-client's registry formats (and what `get()` splays): the exposition of every series. It
   * replaces the parent's, which reads the parent's own label map, never written here.
   */
  async getForPromString (): Promise<Exposition> {
    const values: Sample[] = []
    const name = this.#name
    for (const series of this.#series.values()) {
      let cumulative = 0
      for (let i = 0; i < this.#bounds.length; i++) {
        cumulative += series.counts[i]!
        values.push({ metricName: `${name}_bucket`, labels: { le: this.#bounds[i]! }, value: cumulative, sharedLabels: series.labels })
      }
      values.push({ metricName: `${name}_bucket`, labels: { le: '+Inf' }, value: series.count, sharedLabels: series.labels })
      values.push({ metricName: `${name}_sum`, labels: {}, value: series.sum, sharedLabels: series.labels })
      values.push({ metricName: `${name}_count`, labels: {}, value: series.count, sharedLabels: series.labels })
    }
    return { name, help: this.#help, type: 'histogram', values, aggregator: 'sum' }
  }
}
