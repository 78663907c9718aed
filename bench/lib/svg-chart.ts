// A line chart as a standalone SVG document, for the generated benchmark page (bench/page.ts): axes with ticks
// and labels, a title, a legend, one line per series (a gap where a value is missing), dashed guide lines for
// budgets, and a <title>/<desc> that say in words what the picture shows. No dependency and no browser: the page
// is written by a script and read on a forge or in an editor, where an SVG image needs no script to show.
//
// The output is a function of the input alone (no dates, no random ids, coordinates rounded to a tenth of a
// pixel), so drawing the same numbers again writes the same bytes.
import { formatNumber, linearScale, pointScale, px, spacedTicks, textWidth, xml } from './chart-axis.ts'

export interface ChartAxis {
  label: string
  /** How a value reads on this axis's ticks and in the description; default: formatNumber. */
  format?: (value: number) => string
}

export interface ChartSeries {
  name: string
  /** One value per x value; null where the value is missing (the line breaks there). */
  values: ReadonlyArray<number | null>
}

export interface LineChart {
  /** Prefix of the ids inside the document (lowercase letters, digits and dashes). */
  id: string
  title: string
  /**
   * The x values, ascending: placed by value (`linear`, the default), by the logarithm of the value (`log`), or
   * one step apart (`ordinal`: runs in order, say, with `format` giving each its label).
   */
  x: ChartAxis & { values: readonly number[], scale?: 'linear' | 'log' | 'ordinal' }
  y: ChartAxis
  series: readonly ChartSeries[]
  /** Horizontal dashed lines across the plot, such as a budget, labelled at their right end. */
  guides?: ReadonlyArray<{ value: number, label: string }>
}

const WIDTH = 720
const PLOT_HEIGHT = 260
const FONT = 12
const TITLE_FONT = 15
const TOP = 48
const RIGHT = 24
const LEGEND_ROW = 20
/** Okabe and Ito's palette, which readers with any common colour-vision deficiency can tell apart (its yellow left
 * out: too pale on white). */
const COLOURS = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#000000']
/** Marker shapes in turn, so that series stay apart in grey too. */
const SHAPES = ['circle', 'square', 'diamond', 'triangle'] as const
const GUIDE_STROKE = 'stroke="#555555" stroke-width="1.5" stroke-dasharray="6 4"'
/** Past the palette, lines are dashed as well. */
const DASHES = ['', '7 3', '2 3']

function check (chart: LineChart): void {
  if (!/^[a-z0-9]+(?:-[a-z0-9]+)*$/.test(chart.id)) throw new RangeError(`chart id '${chart.id}' must be lowercase letters, digits and single dashes`)
  if (chart.series.length === 0) throw new RangeError(`chart '${chart.id}' has no series`)
  for (const series of chart.series) {
    if (series.values.length !== chart.x.values.length) {
      throw new RangeError(`chart '${chart.id}': series '${series.name}' has ${series.values.length} values for ${chart.x.values.length} x values`)
    }
    for (const [i, value] of series.values.entries()) {
      if (value !== null && !Number.isFinite(value)) throw new RangeError(`chart '${chart.id}': series '${series.name}' value ${i} is ${String(value)}, not a finite number or null`)
    }
  }
  for (const guide of chart.guides ?? []) {
    if (!Number.isFinite(guide.value)) throw new RangeError(`chart '${chart.id}': guide '${guide.label}' is ${String(guide.value)}, not a finite number`)
  }
}

/** A value as written into the document's data attributes: four significant digits. */
function round (value: number): number {
  return Number(value.toPrecision(4))
}

function marker (shape: typeof SHAPES[number], x: number, y: number, colour: string): string {
  const at = `fill="${colour}"`
  if (shape === 'circle') return `<circle cx="${x}" cy="${y}" r="3.5" ${at}/>`
  if (shape === 'square') return `<rect x="${px(x - 3.2)}" y="${px(y - 3.2)}" width="6.4" height="6.4" ${at}/>`
  if (shape === 'diamond') return `<path d="M${x} ${px(y - 4.5)}L${px(x + 4.5)} ${y}L${x} ${px(y + 4.5)}L${px(x - 4.5)} ${y}Z" ${at}/>`
  return `<path d="M${x} ${px(y - 4.5)}L${px(x + 4.2)} ${px(y + 3.5)}L${px(x - 4.2)} ${px(y + 3.5)}Z" ${at}/>`
}

/** The chart in words, for <desc>: every series with its values in x order, and the guides. */
export function describe (chart: LineChart): string {
  const x = chart.x.format ?? formatNumber
  const y = chart.y.format ?? formatNumber
  const lines = chart.series.map((s) => `${s.name}: ${s.values.map((v, i) => `${v === null ? 'missing' : y(v)} at ${x(chart.x.values[i]!)}`).join(', ')}.`)
  const guides = (chart.guides ?? []).map((g) => `Dashed line: ${g.label} (${y(g.value)}).`)
  return [`Line chart of ${chart.y.label} against ${chart.x.label}.`, ...lines, ...guides].join(' ')
}

/** Lays the legend entries out in rows across the chart's width; returns each entry's position and the rows used. */
function legendLayout (names: readonly string[], left: number): { at: Array<[number, number]>, rows: number } {
  const at: Array<[number, number]> = []
  let x = left
  let row = 0
  for (const name of names) {
    const width = 30 + textWidth(name, FONT) + 18
    if (x > left && x + width > WIDTH - RIGHT) {
      x = left
      row++
    }
    at.push([x, row])
    x += width
  }
  return { at, rows: row + 1 }
}

/** The chart as an SVG document (with a trailing newline). Throws a RangeError naming what is wrong with bad input. */
export function lineChartSvg (chart: LineChart): string {
  check(chart)
  const formatX = chart.x.format ?? formatNumber
  const formatY = chart.y.format ?? formatNumber
  const plotted = chart.series.flatMap((s) => s.values.filter((v): v is number => v !== null))
  const yScale = linearScale([...plotted, ...(chart.guides ?? []).map((g) => g.value)], TOP + PLOT_HEIGHT, TOP)
  const left = px(34 + Math.max(...yScale.ticks.map((t) => textWidth(formatY(t), FONT))))
  const right = WIDTH - RIGHT
  const bottom = TOP + PLOT_HEIGHT
  // The first and last x labels are centred on their points: the points sit far enough in for them to fit.
  const half = (value: number): number => textWidth(formatX(value), FONT) / 2
  const xFrom = Math.max(left + 16, half(chart.x.values[0]!) + 8)
  const xTo = Math.min(right - 16, WIDTH - 8 - half(chart.x.values[chart.x.values.length - 1]!))
  const xScale = pointScale(chart.x.values, xFrom, xTo, chart.x.scale ?? 'linear')
  const xTicks = spacedTicks(xScale.ticks, xScale.at, (t) => textWidth(formatX(t), FONT))
  const guides = chart.guides ?? []
  const legend = legendLayout([...chart.series.map((s) => s.name), ...guides.map((g) => g.label)], left)
  const legendTop = bottom + 62
  const height = legendTop + legend.rows * LEGEND_ROW + 8
  const id = chart.id

  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" role="img" ` +
      `aria-labelledby="${id}-title ${id}-desc" font-family="Helvetica, Arial, sans-serif" font-size="${FONT}">`,
    `<title id="${id}-title">${xml(chart.title)}</title>`,
    `<desc id="${id}-desc">${xml(describe(chart))}</desc>`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    `<text x="${WIDTH / 2}" y="26" text-anchor="middle" font-size="${TITLE_FONT}" font-weight="bold" fill="#222222">${xml(chart.title)}</text>`,
    '<g class="y-axis" fill="#444444">',
    ...yScale.ticks.map((t) => `<line x1="${left}" x2="${right}" y1="${yScale.at(t)}" y2="${yScale.at(t)}" stroke="${t === 0 ? '#888888' : '#e4e4e4'}"/>` +
      `<text x="${left - 6}" y="${px(yScale.at(t) + 4)}" text-anchor="end">${xml(formatY(t))}</text>`),
    `<text transform="translate(16 ${px(TOP + PLOT_HEIGHT / 2)}) rotate(-90)" text-anchor="middle">${xml(chart.y.label)}</text>`,
    '</g>',
    '<g class="x-axis" fill="#444444">',
    `<line x1="${left}" x2="${right}" y1="${bottom}" y2="${bottom}" stroke="#888888"/>`,
    ...xTicks.map((t) => `<line x1="${xScale.at(t)}" x2="${xScale.at(t)}" y1="${bottom}" y2="${bottom + 5}" stroke="#888888"/>` +
      `<text x="${xScale.at(t)}" y="${bottom + 19}" text-anchor="middle">${xml(formatX(t))}</text>`),
    `<text x="${px((left + right) / 2)}" y="${bottom + 40}" text-anchor="middle">${xml(chart.x.label)}</text>`,
    '</g>',
  ]
  for (const guide of guides) {
    const y = yScale.at(guide.value)
    out.push(`<g class="guide" data-value="${round(guide.value)}"><line x1="${left}" x2="${right}" y1="${y}" y2="${y}" ${GUIDE_STROKE}/></g>`)
  }
  chart.series.forEach((series, i) => {
    const colour = COLOURS[i % COLOURS.length]!
    const shape = SHAPES[i % SHAPES.length]!
    const dash = DASHES[Math.floor(i / COLOURS.length) % DASHES.length]!
    const points = series.values.map((v, j) => v === null ? null : [xScale.at(chart.x.values[j]!), yScale.at(v)] as const)
    const path = points.map((p, j) => p === null ? '' : `${j > 0 && points[j - 1] !== null ? 'L' : 'M'}${p[0]} ${p[1]}`).join('')
    out.push(`<g class="series" data-series="${xml(series.name)}">`)
    if (path.includes('L')) out.push(`<path d="${path}" fill="none" stroke="${colour}" stroke-width="2"${dash === '' ? '' : ` stroke-dasharray="${dash}"`}/>`)
    points.forEach((p, j) => {
      if (p === null) return
      const value = series.values[j]!
      out.push(`<g class="point" data-x="${round(chart.x.values[j]!)}" data-y="${round(value)}">${marker(shape, p[0], p[1], colour)}` +
        `<title>${xml(`${series.name}: ${formatY(value)} at ${formatX(chart.x.values[j]!)}`)}</title></g>`)
    })
    out.push('</g>')
    const [lx, row] = legend.at[i]!
    const ly = legendTop + row * LEGEND_ROW
    out.push(`<g class="legend-entry"><line x1="${px(lx)}" x2="${px(lx + 24)}" y1="${ly}" y2="${ly}" stroke="${colour}" stroke-width="2"${dash === '' ? '' : ` stroke-dasharray="${dash}"`}/>` +
      `${marker(shape, px(lx + 12), ly, colour)}<text x="${px(lx + 30)}" y="${ly + 4}" fill="#222222">${xml(series.name)}</text></g>`)
  })
  guides.forEach((guide, i) => {
    const [lx, row] = legend.at[chart.series.length + i]!
    const ly = legendTop + row * LEGEND_ROW
    out.push(`<g class="legend-entry"><line x1="${px(lx)}" x2="${px(lx + 24)}" y1="${ly}" y2="${ly}" ${GUIDE_STROKE}/>` +
      `<text x="${px(lx + 30)}" y="${ly + 4}" fill="#222222">${xml(guide.label)}</text></g>`)
  })
  out.push('</svg>')
  return out.join('\n') + '\n'
}
