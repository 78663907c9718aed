// `npm run bench:page`: runs `npm run bench` with its default settings (BENCH_* variables are not passed on, but
// for BENCH_REDIS_URL and BENCH_POSTGRES_URL, which say where Redis and PostgreSQL are) and writes
// docs/benchmarks.md from its results JSON: the machine, the settings, the floors, every budget with its ratio and
// PASS/FAIL, the stdio peers and a history of runs, whose rows (one per run: date, git revision, the main ratios)
// are kept in docs/benchmarks-history.json beside the page.
//
//   npm run bench:page                                  # run the bench, then write the page and add the run to the history
//   npm run bench:page -- --from <results.json>         # write the page from an existing results file, without running the bench
//   npm run bench:page -- --out <dir>/benchmarks.md     # write the page (and <dir>/benchmarks-history.json) elsewhere
//
// A run already in the history (same start date) replaces its row, so rendering one results file twice adds nothing.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { basename, dirname, join, relative, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { REPO_ROOT } from '../test/fixtures/spawn-upstream.ts'
import { readSettings } from './lib/settings.ts'
import type { Table } from './lib/stats.ts'
import type { Check, SectionResult } from './lib/types.ts'

const DEFAULT_PAGE = join(REPO_ROOT, 'docs', 'benchmarks.md')
const COMMAND = 'npm run bench:page'
/** Settings that say where things are rather than what is measured: left out of the page and of the comparison with the defaults. */
const NOT_SHOWN = new Set(['out', 'profileDir'])

/** The JSON results are read as written by bench/run.ts, without a schema: a missing field shows as n/a. */
type Json = Record<string, any>

interface Results {
  environment: { date: string, node: string, platform: string, cpus: number, cpuModel: string, loadavg: number[], git: string | null }
  settings: Json
  checks: Array<Check & { section: string }>
  sections: Record<string, SectionResult & { title: string, data: Json }>
}

interface HistoryRow {
  date: string
  git: string | null
  /** `default`, or the settings that differed from the defaults. */
  settings: string
  ratios: Record<string, number | null>
  /** Budgets met, and budgets measured (PASS or FAIL). */
  budgets: [number, number]
}

/**
 * A change that moved the numbers, and what it bought: entered by hand in the history file (`fixes`, oldest
 * first) by whoever made it, measured before and after in one session (the same section, minutes apart).
 */
interface Fix {
  /** The commit (short hash) or range that made the change. */
  commit: string
  what: string
  /** What it bought: the ratio or cost before → after, and how it was measured. */
  measured: string
}

interface History { generatedBy: string, runs: HistoryRow[], fixes?: Fix[] }

/** The main ratios, one history column each: where each comes from in the results and how it reads. */
const MAIN_RATIOS: ReadonlyArray<{ id: string, label: string, unit: '×' | '%', of: (r: Results) => unknown }> = [
  { id: 'sync.addedP50', label: 'sync +p50', unit: '×', of: (r) => r.sections['sync-call']?.data.ratios?.gateway?.addedP50 },
  { id: 'sync.throughput', label: 'sync c=64', unit: '%', of: (r) => r.sections['sync-call']?.data.ratios?.gateway?.throughputToForwarder },
  { id: 'sync2026.addedP50', label: 'sync +p50 2026', unit: '×', of: (r) => r.sections['sync-call']?.data.ratios?.['gateway 2026-07-28']?.addedP50 },
  { id: 'sync2026.throughput', label: 'sync c=64 2026', unit: '%', of: (r) => r.sections['sync-call']?.data.ratios?.['gateway 2026-07-28']?.throughputToForwarder },
  { id: 'get.memory', label: 'tasks/get memory', unit: '%', of: (r) => r.sections['task-get']?.data.memory?.ratioToFloor },
  { id: 'get.sqlite', label: 'tasks/get sqlite', unit: '%', of: (r) => r.sections['task-get']?.data.sqlite?.ratioToFloor },
  { id: 'get2026.memory', label: 'tasks/get memory 2026', unit: '%', of: (r) => r.sections['task-get']?.data['memory 2026-07-28']?.ratioToFloor },
  { id: 'get2026.sqlite', label: 'tasks/get sqlite 2026', unit: '%', of: (r) => r.sections['task-get']?.data['sqlite 2026-07-28']?.ratioToFloor },
  { id: 'get.cluster', label: 'tasks/get 3 processes', unit: '%', of: (r) => r.sections['task-cluster']?.data.redis?.ratios?.tasksGetToFloor },
  { id: 'get.cluster.postgres', label: 'tasks/get 3 processes postgres', unit: '%', of: (r) => r.sections['task-cluster']?.data.postgres?.ratios?.tasksGetToFloor },
  { id: 'create.memory', label: 'create p99 memory', unit: '×', of: (r) => r.sections['task-create']?.data.p99RatioToTasksGet?.memory },
  { id: 'create.sqlite', label: 'create p99 sqlite', unit: '×', of: (r) => r.sections['task-create']?.data.p99RatioToTasksGet?.sqlite },
  { id: 'create2026.memory', label: 'create p99 memory 2026', unit: '×', of: (r) => r.sections['task-create']?.data.p99RatioToTasksGet?.['memory 2026-07-28'] },
  { id: 'create2026.sqlite', label: 'create p99 sqlite 2026', unit: '×', of: (r) => r.sections['task-create']?.data.p99RatioToTasksGet?.['sqlite 2026-07-28'] },
  { id: 'create.cluster', label: 'create p99 3 processes', unit: '×', of: (r) => r.sections['task-cluster']?.data.redis?.ratios?.createP99ToTasksGetP99 },
  { id: 'create.cluster.postgres', label: 'create p99 3 processes postgres', unit: '×', of: (r) => r.sections['task-cluster']?.data.postgres?.ratios?.createP99ToTasksGetP99 },
]

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

function historyPart (history: History, historyFile: string): string {
  const rows = [...history.runs].reverse().map((run) => [run.date.slice(0, 16).replace('T', ' '), run.git ?? '?', run.settings,
    ...MAIN_RATIOS.map(({ id, unit }) => ratio(run.ratios[id], unit)), `${run.budgets[0]}/${run.budgets[1]}`])
  return `## History\n\nOne row per run of \`${COMMAND}\`, newest first; the rows are kept in [${historyFile}](${historyFile}). ` +
    '× columns: a p99 or added p50 over its floor\'s (lower is better); % columns: throughput over its floor\'s (higher is better); ' +
    '"2026" columns: 2026-07-28 requests.\n\n' +
    markdownTable(['run (UTC)', 'git', 'settings', ...MAIN_RATIOS.map((c) => c.label), 'budgets met'], rows, true)
}

function fixesPart (history: History, historyFile: string): string {
  const fixes = history.fixes ?? []
  const intro = '## What moved the numbers\n\nChanges made for speed and what each bought, measured before and after in one session ' +
    `(the same section, minutes apart), newest first; entered by hand in \`fixes\` of [${historyFile}](${historyFile}).`
  if (fixes.length === 0) return `${intro}\n\nNone recorded yet.`
  return `${intro}\n\n${markdownTable(['commit', 'change', 'what it bought'], [...fixes].reverse().map((f) => [f.commit, f.what, f.measured]))}`
}

function renderPage (results: Results, history: History, historyFile: string): string {
  return [
    '# Benchmarks',
    `<!-- Generated by \`${COMMAND}\` (bench/page.ts) from the results of \`npm run bench\`: do not edit, run the command again. -->`,
    `This page is generated by \`${COMMAND}\` (\`bench/page.ts\`), which runs \`npm run bench\` with its default settings and writes ` +
      'the page from the results. What the bench measures and how: [Development](development.md#documentation-benchmarks-and-conformance). ' +
      'The numbers are of one run on one machine; the ratios, not the absolute rates, are what carries from one machine to another.',
    machine(results),
    settingsPart(results),
    floors(results),
    verdict(results),
    peers(results),
    fixesPart(history, historyFile),
    historyPart(history, historyFile),
  ].join('\n\n') + '\n'
}

/** The variables that say where the servers are, passed on to the bench. */
const SERVERS = new Set(['BENCH_REDIS_URL', 'BENCH_POSTGRES_URL'])

/** Runs the bench with its default settings (BENCH_REDIS_URL and BENCH_POSTGRES_URL passed on) and returns its results file. */
async function runBench (dir: string): Promise<string> {
  const out = join(dir, 'results.json')
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('BENCH_') || SERVERS.has(key)))
  const ignored = Object.keys(process.env).filter((key) => key.startsWith('BENCH_') && !SERVERS.has(key))
  if (ignored.length > 0) process.stderr.write(`bench:page: runs with the default settings; ignoring ${ignored.join(', ')}\n`)
  const child = spawn(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'bench', 'run.ts')], { cwd: REPO_ROOT, stdio: 'inherit', env: { ...env, BENCH_OUT: out } })
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (exitCode) => resolve(exitCode))
  })
  if (code !== 0) throw new Error(`npm run bench failed (exit code ${code ?? 'signal'}); the page is unchanged`)
  return out
}

async function main (): Promise<void> {
  const { values } = parseArgs({ options: { from: { type: 'string' }, out: { type: 'string' } } })
  const page = values.out === undefined ? DEFAULT_PAGE : resolve(values.out)
  const historyPath = join(dirname(page), `${basename(page, '.md')}-history.json`)
  const dir = values.from === undefined ? await mkdtemp(join(tmpdir(), 'mcp-gw-bench-page-')) : undefined
  try {
    const from = values.from ?? await runBench(dir!)
    const results = JSON.parse(await readFile(from, 'utf8')) as Results
    const previous: History = existsSync(historyPath) ? JSON.parse(await readFile(historyPath, 'utf8')) as History : { generatedBy: COMMAND, runs: [] }
    const history = withRun(previous, historyRow(results))
    await mkdir(dirname(page), { recursive: true })
    await writeFile(historyPath, JSON.stringify(history, null, 2) + '\n')
    await writeFile(page, renderPage(results, history, relative(dirname(page), historyPath)))
    process.stdout.write(`bench:page: wrote ${relative(process.cwd(), page)} and ${relative(process.cwd(), historyPath)} (${history.runs.length} runs in the history)\n`)
  } finally {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  }
}

try {
  await main()
} catch (err) {
  process.stderr.write(`bench:page failed: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exitCode = 1
}
