// The arithmetic under bench/lib/svg-chart.ts: axis scales (linear and log), round tick values, number
// formatting and XML escaping. Pure functions; nothing here knows what a benchmark is.

/** Maps a data value to a pixel coordinate along one axis. */
export interface AxisScale {
  /** The pixel position of `value`, rounded to a tenth of a pixel so that the output is stable. */
  at (value: number): number
  /** The tick values drawn along the axis, ascending. */
  ticks: number[]
}

/** Rounds to one decimal: the coordinates written into an SVG, so that the same data writes the same bytes. */
export function px (value: number): number {
  const rounded = Math.round(value * 10) / 10
  return Object.is(rounded, -0) ? 0 : rounded
}

/**
 * About `count` round tick values (steps of 1, 2 or 5 × 10ⁿ, whichever gives the count nearest `count`, as d3's
 * ticks do) covering `min`..`max`; the first tick is at or below `min`, the last at or above `max`.
 */
export function niceTicks (min: number, max: number, count = 5): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max) || min > max) throw new RangeError(`no ticks for the range ${min}..${max}`)
  if (min === max) return niceTicks(min, min === 0 ? 1 : min + Math.abs(min), count)
  const raw = (max - min) / count
  const magnitude = 10 ** Math.floor(Math.log10(raw))
  const fraction = raw / magnitude
  const step = (fraction >= Math.sqrt(50) ? 10 : fraction >= Math.sqrt(10) ? 5 : fraction >= Math.sqrt(2) ? 2 : 1) * magnitude
  const first = Math.floor(min / step)
  const last = Math.ceil(max / step)
  const ticks: number[] = []
  for (let i = first; i <= last; i++) ticks.push(Number((i * step).toPrecision(12)))
  return ticks
}

/** A linear scale over `values` (and 0 when all are of one sign: bars of growth read from zero), drawn from `from` to `to` pixels. */
export function linearScale (values: readonly number[], from: number, to: number, count = 5): AxisScale {
  const min = Math.min(0, ...values)
  const max = Math.max(0, ...values)
  const ticks = niceTicks(min, max, count)
  const low = ticks[0]!
  const high = ticks[ticks.length - 1]!
  return { ticks, at: (value) => px(from + ((value - low) / (high - low)) * (to - from)) }
}

/**
 * A scale that places `values` (ascending, distinct) from `from` to `to` pixels: evenly by value, by the
 * logarithm of the value when `log` is set, or one step apart when `ordinal` is set (the i-th value at the
 * i-th step). Ticks are the values themselves. A single value sits in the middle.
 */
export function pointScale (values: readonly number[], from: number, to: number, mode: 'linear' | 'log' | 'ordinal'): AxisScale {
  if (values.length === 0) throw new RangeError('an x axis needs at least one value')
  for (const [i, value] of values.entries()) {
    if (!Number.isFinite(value)) throw new RangeError(`x value ${i} is ${String(value)}, not a finite number`)
    if (mode === 'log' && value <= 0) throw new RangeError(`x value ${i} is ${value}: a log scale takes only values above 0`)
    if (i > 0 && value <= values[i - 1]!) throw new RangeError(`x values must ascend: value ${i} (${value}) is not above value ${i - 1} (${values[i - 1]})`)
  }
  const position = mode === 'log' ? Math.log10 : (value: number) => value
  const first = position(values[0]!)
  const last = position(values[values.length - 1]!)
  const at = (value: number): number => {
    if (values.length === 1) return px((from + to) / 2)
    if (mode === 'ordinal') return px(from + (values.indexOf(value) / (values.length - 1)) * (to - from))
    return px(from + ((position(value) - first) / (last - first)) * (to - from))
  }
  return { ticks: [...values], at }
}

/** Keeps the ticks whose labels (`width` pixels wide each, centred) do not overlap the last one kept. */
export function spacedTicks (ticks: readonly number[], at: (value: number) => number, width: (value: number) => number): number[] {
  const kept: number[] = []
  let rightEdge = Number.NEGATIVE_INFINITY
  for (const tick of ticks) {
    const left = at(tick) - width(tick) / 2
    if (left < rightEdge + 4) continue
    kept.push(tick)
    rightEdge = at(tick) + width(tick) / 2
  }
  return kept
}

/** A number as a reader wants it on an axis or in a table: thousands grouped, at most `digits` significant digits. */
export function formatNumber (value: number, digits = 3): string {
  if (!Number.isFinite(value)) return String(value)
  if (value === 0) return '0'
  const magnitude = Math.floor(Math.log10(Math.abs(value)))
  const decimals = Math.max(0, Math.min(6, digits - 1 - magnitude))
  const rounded = Number(value.toFixed(decimals))
  return rounded.toLocaleString('en-US', { maximumFractionDigits: decimals, useGrouping: true })
}

/** The width in pixels a label takes in the chart's sans-serif font, estimated (no font metrics without a browser). */
export function textWidth (text: string, fontSize: number): number {
  return text.length * fontSize * 0.58
}

/** Escapes text for an XML attribute value or element content. */
export function xml (text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;')
}
