// The scale part of the benchmark page: the curves that section `scale` records in its data (how a cost grows
// with the stored tasks, the open sessions, the watched tasks, the stdio sessions), each drawn as a line chart
// beside a table of its numbers. The curves are checked against their schema, so a section that writes a
// malformed curve fails the page with the path of what is wrong rather than drawing nonsense.
import { z } from 'zod'
import { formatNumber } from './chart-axis.ts'
import type { Json } from './bench-results.ts'
import { image, type ChartFile } from './history-charts.ts'
import { lineChartSvg, type LineChart } from './svg-chart.ts'

const ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/

const curveSchema = z.object({
  id: z.string().regex(ID, 'letters, digits, dots, dashes and underscores, starting with a letter or digit'),
  title: z.string().min(1),
  x: z.object({ label: z.string(), values: z.array(z.number()).min(1) }),
  y: z.object({ label: z.string(), unit: z.string() }),
  series: z.array(z.object({ name: z.string().min(1), values: z.array(z.number().nullable()) })).min(1),
  log: z.boolean().optional(),
})

/** One figure of the scale section at several sizes: x the sizes, one series per store or path. */
export type ScaleCurve = z.infer<typeof curveSchema>

type MarkdownTable = (head: string[], rows: string[][], numbers: boolean) => string

/** A section's data as the page reads it: its title, notes, tables and data. */
interface ScaleSection {
  title: string
  notes: string[]
  tables: Array<{ title: string, head: string[], rows: string[][] }>
  data: Json
}

/** The curves of section `scale`, checked; throws an error naming the path of the first thing wrong. */
export function readCurves (data: Json): ScaleCurve[] {
  const parsed = z.array(curveSchema).safeParse(data.curves)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    throw new Error(`sections.scale.data.curves${issue.path.map((p) => typeof p === 'number' ? `[${p}]` : `.${String(p)}`).join('')}: ${issue.message}`)
  }
  const names = new Set<string>()
  for (const curve of parsed.data) {
    const name = fileName(curve)
    if (names.has(name)) throw new Error(`sections.scale.data.curves: two curves have the id '${curve.id}' (ids are compared in lowercase)`)
    names.add(name)
  }
  return parsed.data
}

function fileName (curve: ScaleCurve): string {
  return `scale-${curve.id.toLowerCase().replaceAll(/[._]+/g, '-')}.svg`
}

function axisLabel (label: string, unit: string): string {
  return unit === '' ? label : `${label} (${unit})`
}

/** A curve as a line chart: one line per series, the x axis logarithmic when the curve says so. */
export function curveChart (curve: ScaleCurve): LineChart {
  return {
    id: fileName(curve).slice(0, -'.svg'.length),
    title: curve.title,
    x: { label: curve.x.label, values: curve.x.values, scale: curve.log === true ? 'log' : 'linear' },
    y: { label: axisLabel(curve.y.label, curve.y.unit) },
    series: curve.series,
  }
}

/** The curve's SVG; bad numbers (x values not ascending, say) fail with the curve's place in the results. */
function drawn (curve: ScaleCurve, index: number): string {
  try {
    return lineChartSvg(curveChart(curve))
  } catch (err) {
    throw new Error(`sections.scale.data.curves[${index}] ('${curve.id}'): ${err instanceof Error ? err.message : String(err)}`, { cause: err })
  }
}

function cell (value: number | null | undefined): string {
  return value === null || value === undefined ? '—' : formatNumber(value, 4)
}

/**
 * The page's scale section and its chart files (`charts`: the folder of the charts relative to the page), or a
 * line saying the section was not run. `table` writes a Markdown table (the page's own).
 */
export function scalePart (
  section: ScaleSection | undefined,
  charts: string,
  table: MarkdownTable,
): { markdown: string, files: ChartFile[] } {
  const intro = '## Scale\n\nHow the costs grow with the work: each figure measured at several sizes in one run (section `scale`), ' +
    'drawn as a line per store or path, with its numbers below. Growth worse than linear in any of them is a defect, not a number to report.'
  if (section === undefined) {
    return { markdown: `${intro}\n\nThe scale section was not run in this run, so there are no curves: \`BENCH_SECTIONS=scale npm run bench\` runs it alone.`, files: [] }
  }
  const curves = readCurves(section.data)
  const files: ChartFile[] = []
  const parts = [intro, `${section.title} (section \`scale\`).`]
  if (section.notes.length > 0) parts.push(section.notes.map((note) => `- ${note}`).join('\n'))
  if (curves.length === 0) parts.push('The section recorded no curves in this run.')
  for (const [i, curve] of curves.entries()) {
    const file: ChartFile = {
      name: fileName(curve),
      svg: drawn(curve, i),
      alt: `Line chart: ${curve.title}; ${axisLabel(curve.y.label, curve.y.unit)} against ${curve.x.label}` +
        `${curve.log === true ? ' (log scale)' : ''}; lines: ${curve.series.map((s) => s.name).join(', ')}`,
    }
    files.push(file)
    const rows = curve.x.values.map((x, i) => [formatNumber(x, 6), ...curve.series.map((s) => cell(s.values[i]))])
    parts.push(`### ${curve.title}`, image(file, charts),
      `${axisLabel(curve.y.label, curve.y.unit)}; — where not measured.\n\n${table([curve.x.label, ...curve.series.map((s) => s.name)], rows, true)}`)
  }
  if (section.tables.length > 0) {
    parts.push('### All measurements of the section', ...section.tables.map((t) => `${t.title}\n\n${table(t.head, t.rows, true)}`))
  }
  return { markdown: parts.join('\n\n'), files }
}
