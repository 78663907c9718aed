// The benchmark page (docs/benchmarks.md) written from a results file of `npm run bench`: the machine, the
// settings, the floors, every budget with its ratio and PASS/FAIL, the scale curves, the stdio peers, the fixes
// and a history of runs kept beside the page, with the charts (bench/lib/svg-chart.ts) in a folder beside it.
// bench/page.ts is the command (`npm run bench:page`) around it.
import { existsSync } from 'node:fs'
import { mkdir, readFile } from 'node:fs/promises'
import { basename, dirname, join, relative } from 'node:path'
import { MAIN_RATIOS, type History, type HistoryRow, type Json, type Results } from './bench-results.ts'
import { writeCharts, writeIfChanged } from './chart-files.ts'
import { historyCharts, image, type ChartFile } from './history-charts.ts'
import { scalePart } from './scale-curves.ts'
import { readSettings } from './settings.ts'
import type { Table } from './stats.ts'

const COMMAND = 'npm run bench:page'
/** Settings that say where things are rather than what is measured: left out of the page and of the comparison with the defaults. */
const NOT_SHOWN = new Set(['out', 'profileDir'])

function cell (text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ')
}

/** A Markdown table; `numbers`: every column but the first right-aligned. */
function markdownTable (head: readonly string[], rows: readonly string[][], numbers = false): string {
  return [head, head.map((_, i) => numbers && i > 0 ? '---:' : '---'), ...rows].map((row) => `| ${row.map(cell).join(' | ')} |`).join('\n')
}

function ratio (value: number | null | undefined, unit: '×' | '%'): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '—'
  return unit === '%' ? `${(value * 100).toFixed(0)} %` : `${value.toFixed(2)} ×`
}

function rate (value: unknown): string {
  return typeof value === 'number' && Number.isFinite(value) ? `${value.toFixed(0)}/s` : 'n/a'
}

function millis (value: unknown): string {
  return typeof value === 'number' && Number.isFinite(value) ? `${value.toFixed(3)} ms` : 'n/a'
}

/** The settings that differ from the defaults, as `name=value`; `default` when none does. */
function settingsSummary (settings: Json): string {
  const defaults: Json = readSettings({})
  const differing = Object.keys(defaults)
    .filter((key) => !NOT_SHOWN.has(key) && key !== 'redisUrl' && key !== 'postgresUrl' && JSON.stringify(settings[key]) !== JSON.stringify(defaults[key]))
    .map((key) => `${key}=${Array.isArray(settings[key]) ? settings[key].join(',') : String(settings[key])}`)
  return differing.length === 0 ? 'default' : differing.join(' ')
}

function historyRow (results: Results): HistoryRow {
  const measured = results.checks.filter((c) => c.pass !== undefined)
  return {
    date: results.environment.date,
    git: results.environment.git,
    settings: settingsSummary(results.settings),
    ratios: Object.fromEntries(MAIN_RATIOS.map(({ id, of }) => {
      const value = of(results)
      return [id, typeof value === 'number' && Number.isFinite(value) ? value : null]
    })),
    budgets: [measured.filter((c) => c.pass === true).length, measured.length],
  }
}

/** The history with `row` added, or put in place of the row of the same run. */
function withRun (history: History, row: HistoryRow): History {
  const runs = [...history.runs.filter((r) => r.date !== row.date), row].sort((a, b) => a.date.localeCompare(b.date))
  return { generatedBy: COMMAND, runs, ...(history.fixes === undefined ? {} : { fixes: history.fixes }) }
}

function machine (results: Results): string {
  const e = results.environment
  const rows = [
    ['date (start of the run)', e.date],
    ['git revision', e.git ?? 'unknown'],
    ['CPU', `${e.cpus} × ${e.cpuModel}`],
    ['Node', e.node],
    ['platform', e.platform],
    ['load average at start (1, 5, 15 min)', e.loadavg.map((l) => l.toFixed(2)).join(', ')],
  ]
  const busy = (e.loadavg[0] ?? 0) > 0.5 ? '\n\nThe machine was already busy when the run started (1-minute load average over 0.5): the numbers are noisy.' : ''
  return `## Machine\n\n${markdownTable(['', ''], rows)}${busy}`
}

function settingsPart (results: Results): string {
  const defaults: Json = readSettings({})
  const shown = (value: unknown): string => value === undefined ? '—' : Array.isArray(value) ? (value.length === 0 ? '—' : value.join(', ')) : String(value)
  const rows = Object.keys(defaults).filter((key) => !NOT_SHOWN.has(key)).map((key) => {
    const value = results.settings[key]
    const differs = key !== 'redisUrl' && key !== 'postgresUrl' && JSON.stringify(value) !== JSON.stringify(defaults[key])
    return [key, shown(value), differs ? `not the default (${shown(defaults[key])})` : '']
  })
  const summary = settingsSummary(results.settings)
  const warning = summary === 'default' ? '' : ` **This run did not use the defaults** (${summary}): compare its ratios with those of default runs with care.`
  return `## Settings\n\nThe environment variables of \`bench/run.ts\` (see its header); \`${COMMAND}\` runs with the defaults.${warning}\n\n` +
    markdownTable(['setting', 'value', ''], rows)
}

function floors (results: Results): string {
  const sync = results.sections['sync-call']?.data
  const get = results.sections['task-get']?.data
  const create = results.sections['task-create']?.data
  const cluster = results.sections['task-cluster']?.data
  const rows: string[][] = []
  const template = (floor: string): string => {
    const setup = get?.floorSetup?.[floor]
    return setup === undefined ? '' : ` (${JSON.stringify(setup.template.answer).length} bytes of JSON); windows ${setup.perWindowPerSecond.map(rate).join(', ')}`
  }
  if (sync !== undefined) {
    rows.push(['bare undici forwarder', 'sync-call', 'a keep-alive pool of as many upstream connections as the gateway\'s maxConcurrentCalls, no MCP, between the ' +
      'load generator and the demo upstream: the cost of one extra hop', `adds ${millis(sync.addedMs?.forwarder?.p50)} p50 at c=1; ${rate(sync.concurrencyN?.forwarder?.callsPerSecond)} at c=${sync.concurrencyN?.concurrency}`])
    rows.push(['direct path', 'sync-call', 'the load generator calling the demo upstream itself',
      `p50 ${millis(sync.concurrency1?.direct?.latency?.p50)} at c=1; ${rate(sync.concurrencyN?.direct?.callsPerSecond)} at c=${sync.concurrencyN?.concurrency}`])
  }
  if (get !== undefined) {
    for (const [floor, dialect] of [['floor', '2025-11-25'], ['floor 2026-07-28', '2026-07-28']] as const) {
      if (get[floor] === undefined) continue
      rows.push([`bare Fastify route (${dialect})`, 'task-get', `the gateway's Fastify in its own process answering the gateway's own ${dialect} tasks/get answer${template(floor)}`,
        `${rate(get[floor].requestsPerSecond)} with ${get.workers} workers`])
    }
  }
  if (create !== undefined) {
    const p99 = Object.entries(create).filter(([, v]) => v?.get?.latency?.p99 !== undefined).map(([key, v]) => `${key} ${millis(v.get.latency.p99)}`)
    rows.push(['tasks/get at c=1', 'task-create', 'the same gateway, client and tasks in flight, reading instead of creating: the floor of task creation p99', `p99 ${p99.join('; ')}`])
  }
  for (const store of ['redis', 'postgres'] as const) {
    if (cluster?.[store] === undefined) continue
    rows.push([`three bare Fastify routes (${store})`, 'task-cluster', 'one per gateway process, requests round robin over them as over the three gateways', rate(cluster[store].floor?.perSecond)])
  }
  return '## Floors\n\nEvery budget is a ratio to a floor measured in the same run, on the same machine, by the same load generator (its own process).\n\n' +
    markdownTable(['floor', 'section', 'what it is', 'measured'], rows)
}

function verdict (results: Results): string {
  const parts = ['## Budgets']
  const met = historyRow(results).budgets
  parts.push(`${met[0]} of ${met[1]} measured budgets met (the bench reports; it does not gate). N/A: not measurable in this run.`)
  for (const [id, section] of Object.entries(results.sections)) {
    const checks = results.checks.filter((c) => c.section === id)
    if (checks.length === 0) continue
    const rows = checks.map((c) => [c.budget, c.limit, c.measured, c.pass === undefined ? 'N/A' : c.pass ? 'PASS' : 'FAIL'])
    parts.push(`### ${section.title}\n\nSection \`${id}\`.\n\n${markdownTable(['budget', 'limit', 'measured', ''], rows)}`)
  }
  return parts.join('\n\n')
}

function peers (results: Results): string {
  const section = results.sections['stdio-peers']
  if (section === undefined || section.tables.length === 0) return '## Stdio peers\n\nNot measured in this run (section `stdio-peers`).'
  const tables = section.tables.map((t: Table) => `${t.title}\n\n${markdownTable(t.head, t.rows, true)}`)
  return `## Stdio peers\n\n${section.title} (section \`stdio-peers\`).\n\n${tables.join('\n\n')}`
}

function historyPart (history: History, historyFile: string, charts: readonly ChartFile[], chartsDir: string): string {
  const rows = [...history.runs].reverse().map((run) => [run.date.slice(0, 16).replace('T', ' '), run.git ?? '?', run.settings,
    ...MAIN_RATIOS.map(({ id, unit }) => ratio(run.ratios[id], unit)), `${run.budgets[0]}/${run.budgets[1]}`])
  return `## History\n\nOne row per run of \`${COMMAND}\`, newest first; the rows are kept in [${historyFile}](${historyFile}). ` +
    '× columns: a p99 or added p50 over its floor\'s (lower is better); % columns: throughput over its floor\'s (higher is better); ' +
    '"2026" columns: 2026-07-28 requests. The charts draw the same ratios, oldest run first, with the budget of this run dashed.\n\n' +
    charts.map((chart) => `${image(chart, chartsDir)}\n\n`).join('') +
    markdownTable(['run (UTC)', 'git', 'settings', ...MAIN_RATIOS.map((c) => c.label), 'budgets met'], rows, true)
}

function fixesPart (history: History, historyFile: string): string {
  const fixes = history.fixes ?? []
  const intro = '## What moved the numbers\n\nChanges made for speed and what each bought, measured before and after in one session ' +
    `(the same section, minutes apart), newest first; entered by hand in \`fixes\` of [${historyFile}](${historyFile}).`
  if (fixes.length === 0) return `${intro}\n\nNone recorded yet.`
  return `${intro}\n\n${markdownTable(['commit', 'change', 'what it bought'], [...fixes].reverse().map((f) => [f.commit, f.what, f.measured]))}`
}

interface RenderedPage { markdown: string, charts: ChartFile[] }

/** The page and the charts it shows; `chartsDir`: the folder of the charts relative to the page. */
function renderPage (results: Results, history: History, historyFile: string, chartsDir: string): RenderedPage {
  const ratioCharts = historyCharts(history, results)
  const scale = scalePart(results.sections.scale, chartsDir, markdownTable)
  const markdown = [
    '# Benchmarks',
    `<!-- Generated by \`${COMMAND}\` (bench/page.ts) from the results of \`npm run bench\`: do not edit, run the command again. -->`,
    `This page is generated by \`${COMMAND}\` (\`bench/page.ts\`), which runs \`npm run bench\` with its default settings and writes ` +
      'the page from the results. What the bench measures and how: [Development](development.md#documentation-benchmarks-and-conformance). ' +
      'The numbers are of one run on one machine; the ratios, not the absolute rates, are what carries from one machine to another. ' +
      `The charts are SVG files in [${chartsDir}/](${chartsDir}/), drawn by the same command from the same numbers (\`bench/lib/svg-chart.ts\`).`,
    machine(results),
    settingsPart(results),
    floors(results),
    verdict(results),
    scale.markdown,
    peers(results),
    fixesPart(history, historyFile),
    historyPart(history, historyFile, ratioCharts, chartsDir),
  ].join('\n\n') + '\n'
  return { markdown, charts: [...scale.files, ...ratioCharts] }
}

/**
 * Writes the page at `page` from the results file `from`: adds the run to the history beside the page
 * (`<name>-history.json`), draws the charts into the folder beside it (`<name>/`), and writes each file only when
 * its content changed. Returns what it did, in a line.
 */
export async function writeBenchmarkPage (from: string, page: string): Promise<string> {
  const historyPath = join(dirname(page), `${basename(page, '.md')}-history.json`)
  const results = JSON.parse(await readFile(from, 'utf8')) as Results
  const previous: History = existsSync(historyPath) ? JSON.parse(await readFile(historyPath, 'utf8')) as History : { generatedBy: COMMAND, runs: [] }
  const history = withRun(previous, historyRow(results))
  const chartsDir = basename(page, '.md')
  const { markdown, charts } = renderPage(results, history, relative(dirname(page), historyPath), chartsDir)
  await mkdir(dirname(page), { recursive: true })
  const svg = await writeCharts(join(dirname(page), chartsDir), charts)
  const written = [
    ...(await writeIfChanged(historyPath, JSON.stringify(history, null, 2) + '\n') ? [historyPath] : []),
    ...(await writeIfChanged(page, markdown) ? [page] : []),
  ].map((file) => relative(process.cwd(), file))
  return `${written.length === 0 ? 'page and history unchanged' : `wrote ${written.join(' and ')}`} ` +
    `(${history.runs.length} runs in the history); ${charts.length} charts in ${relative(process.cwd(), join(dirname(page), chartsDir))}/, ` +
    `${svg.written.length} written, ${svg.removed.length} removed`
}
