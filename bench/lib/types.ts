// The seam between the harness (bench/run.ts) and the benchmark sections (bench/sections/*.ts).
import type { GatewayHandle, GatewayOptions } from './gateway.ts'
import type { UpstreamHandle } from './processes.ts'
import type { Settings } from './settings.ts'
import type { Table } from './stats.ts'

/** One budget of design.md §4, checked against a measurement. */
export interface Check {
  budget: string
  limit: string
  measured: string
  /** undefined when the run could not measure it (e.g. gateway-side stats with an in-process gateway). */
  pass: boolean | undefined
}

export interface SectionResult {
  tables: Table[]
  checks: Check[]
  notes: string[]
  /** Everything worth keeping in the JSON results, under the section's id. */
  data: Record<string, unknown>
}

export interface BenchContext {
  readonly settings: Settings
  /** The demo upstream over Streamable HTTP (child process), shared by all sections. */
  readonly upstream: UpstreamHandle
  /** The default gateway (memory store unless BENCH_STORE says otherwise), started on first use and shared. */
  gateway (): Promise<GatewayHandle>
  /**
   * Another gateway in front of the same upstream (or of a stdio command: `options.stdio`), e.g. with a
   * sqlite store for task sections; it is closed at the end of the run (or earlier by the section).
   */
  startGateway (options: Omit<GatewayOptions, 'upstreamUrl'>): Promise<GatewayHandle>
  /** Progress line on stderr (keeps stdout for the report). */
  log (message: string): void
}

export interface Section {
  /** Stable id: BENCH_SECTIONS selects by it and the JSON results are keyed by it. */
  id: string
  title: string
  run (ctx: BenchContext): Promise<SectionResult>
}
