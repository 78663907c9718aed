// The charts of the benchmark page's history: the main ratios of every run kept in docs/benchmarks-history.json,
// one chart per family of ratios (sync latency, sync throughput, tasks/get, task creation), one line per ratio,
// with the budget of the latest run drawn as a dashed line where its section recorded one.
import { formatNumber } from './chart-axis.ts'
import { MAIN_RATIOS, type History, type MainRatio, type RatioFamily, type Results } from './bench-results.ts'
import { lineChartSvg, type LineChart } from './svg-chart.ts'

/** A chart to be written beside the page, and how the page shows it. */
export interface ChartFile {
  /** File name in the charts folder, e.g. `history-tasks-get.svg`. */
  name: string
  svg: string
  /** The image's alt text on the page. */
  alt: string
}

/** A chart as an image on the page: `charts` is the folder of the charts relative to the page. */
export function image (chart: ChartFile, charts: string): string {
  return `![${chart.alt.replaceAll(/[[\]\\]/g, '\\$&')}](${charts}/${chart.name})`
}

const FAMILIES: Record<RatioFamily, { title: string, y: string }> = {
  'sync-latency': { title: 'Sync tools/call: added p50 latency over the forwarder\'s, per run', y: '× the forwarder\'s added p50 (lower is better)' },
  'sync-throughput': { title: 'Sync tools/call: throughput at concurrency 64, per run', y: '% of the forwarder\'s calls/s (higher is better)' },
  'tasks-get': { title: 'tasks/get throughput over the Fastify floor, per run', y: '% of the floor\'s requests/s (higher is better)' },
  'task-create': { title: 'Task creation p99 over tasks/get p99, per run', y: '× tasks/get p99 (lower is better)' },
}

/** How a ratio reads: `70 %` of a floor, or `1.5 ×` a floor. */
export function ratioFormat (unit: '×' | '%'): (value: number) => string {
  return unit === '%' ? (value) => `${formatNumber(value * 100, 3)} %` : (value) => `${formatNumber(value, 3)} ×`
}

/** A run's date as the x axis shows it: `2026-11-27 18:06` (UTC). */
function runLabel (date: string): string {
  return date.slice(0, 16).replace('T', ' ')
}

/** The dashed lines of a family: one per distinct budget, named after its ratios when the family has several budgets. */
function budgets (ratios: readonly MainRatio[], results: Results): LineChart['guides'] {
  const byValue = new Map<number, string[]>()
  for (const ratio of ratios) {
    const value = ratio.budget(results)
    if (typeof value !== 'number' || !Number.isFinite(value)) continue
    byValue.set(value, [...(byValue.get(value) ?? []), ratio.label])
  }
  const unit = ratios[0]!.unit
  const format = ratioFormat(unit)
  const sign = unit === '%' ? '≥' : '≤'
  return [...byValue.entries()].sort(([a], [b]) => a - b).map(([value, labels]) => ({
    value,
    label: byValue.size === 1 ? `budget ${sign} ${format(value)}` : `budget ${sign} ${format(value)}: ${labels.join(', ')}`,
  }))
}

/**
 * One chart per family of main ratios over the runs of `history` (oldest first, one step per run); ratios that
 * no run measured are left out, and so is a family with none left. The budgets are those of `latest`.
 */
export function historyCharts (history: History, latest: Results): ChartFile[] {
  const runs = history.runs
  const files: ChartFile[] = []
  for (const [family, { title, y }] of Object.entries(FAMILIES) as Array<[RatioFamily, typeof FAMILIES[RatioFamily]]>) {
    const ratios = MAIN_RATIOS.filter((r) => r.family === family)
    const series = ratios
      .map((ratio) => ({ name: ratio.label, values: runs.map((run) => run.ratios[ratio.id] ?? null) }))
      .filter((s) => s.values.some((v) => v !== null))
    if (series.length === 0 || runs.length === 0) continue
    const chart: LineChart = {
      id: `history-${family}`,
      title,
      x: { label: 'run (UTC), oldest first', values: runs.map((_, i) => i), scale: 'ordinal', format: (i) => runLabel(runs[i]!.date) },
      y: { label: y, format: ratioFormat(ratios[0]!.unit) },
      series,
      guides: budgets(ratios, latest),
    }
    files.push({
      name: `${chart.id}.svg`,
      svg: lineChartSvg(chart),
      alt: `Line chart: ${title}, ${runs.length} runs from ${runLabel(runs[0]!.date)} to ${runLabel(runs[runs.length - 1]!.date)} UTC; ` +
        `lines: ${series.map((s) => s.name).join(', ')}${chart.guides!.length > 0 ? '; the budget dashed' : ''}`,
    })
  }
  return files
}
