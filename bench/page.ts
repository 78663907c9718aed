// `npm run bench:page`: runs `npm run bench` with its default settings (BENCH_* variables are not passed on, but
// for BENCH_REDIS_URL and BENCH_POSTGRES_URL, which say where Redis and PostgreSQL are) and writes
// docs/benchmarks.md from its results JSON (bench/lib/benchmark-page.ts): the machine, the settings, the floors,
// every budget with its ratio and PASS/FAIL, the scale curves, the stdio peers and a history of runs, whose rows
// (one per run: date, git revision, the main ratios) are kept in docs/benchmarks-history.json beside the page. The
// charts (the main ratios over the runs, each scale curve) are SVG files in docs/benchmarks/, drawn by
// bench/lib/svg-chart.ts and shown as images.
//
//   npm run bench:page                                  # run the bench, then write the page and add the run to the history
//   npm run bench:page -- --from <results.json>         # write the page from an existing results file, without running the bench
//   npm run bench:page -- --out <dir>/benchmarks.md     # write the page (and <dir>/benchmarks-history.json) elsewhere
//
// A run already in the history (same start date) replaces its row, and a file is written only when its content
// changed (a chart no longer drawn is removed), so rendering one results file twice changes no file.
import { spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { REPO_ROOT } from '../test/fixtures/spawn-upstream.ts'
import { writeBenchmarkPage } from './lib/benchmark-page.ts'

const DEFAULT_PAGE = join(REPO_ROOT, 'docs', 'benchmarks.md')

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
  const dir = values.from === undefined ? await mkdtemp(join(tmpdir(), 'mcp-gw-bench-page-')) : undefined
  try {
    const from = values.from ?? await runBench(dir!)
    process.stdout.write(`bench:page: ${await writeBenchmarkPage(from, page)}\n`)
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
