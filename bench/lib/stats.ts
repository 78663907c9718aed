// Latency summaries and plain-text tables.

export interface LatencySummary {
  count: number
  mean: number
  p50: number
  p90: number
  p99: number
  max: number
}

/** Nearest-rank percentile of an ascending array (`q` in 0..1). */
export function percentile (sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[rank]!
}

/** Summary in milliseconds of latencies given in milliseconds. */
export function summarize (samples: Float64Array): LatencySummary {
  const sorted = Float64Array.from(samples).sort()
  let sum = 0
  for (const value of sorted) sum += value
  return {
    count: sorted.length,
    mean: sum / sorted.length,
    p50: percentile(sorted, 0.5),
    p90: percentile(sorted, 0.9),
    p99: percentile(sorted, 0.99),
    max: sorted.length > 0 ? sorted[sorted.length - 1]! : Number.NaN,
  }
}

export function concat (parts: readonly Float64Array[]): Float64Array {
  const out = new Float64Array(parts.reduce((n, p) => n + p.length, 0))
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.length
  }
  return out
}

export function ms (value: number | null | undefined, digits = 3): string {
  return value === null || value === undefined || Number.isNaN(value) ? 'n/a' : value.toFixed(digits)
}

export function signedMs (value: number, digits = 3): string {
  return `${value >= 0 ? '+' : ''}${value.toFixed(digits)}`
}

export interface Table {
  title: string
  head: string[]
  rows: string[][]
}

/** Left-aligns the first column, right-aligns the others. */
export function renderTable (table: Table): string {
  const all = [table.head, ...table.rows]
  const widths = table.head.map((_, col) => Math.max(...all.map((row) => (row[col] ?? '').length)))
  const line = (row: string[]): string => row.map((cell, col) => col === 0 ? cell.padEnd(widths[col]!) : cell.padStart(widths[col]!)).join('  ')
  const rule = widths.map((w) => '─'.repeat(w)).join('  ')
  return [table.title, line(table.head), rule, ...table.rows.map(line)].join('\n')
}
