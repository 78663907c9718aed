// `npm run bench`: starts the demo upstream (child process) and a gateway (child process by default,
// see BENCH_GATEWAY), runs the registered sections (bench/sections/index.ts), prints tables and a
// verdict against the budgets of design.md §4, and writes the results as JSON (path printed at the end).
// Budgets are ratios to floors measured in the same run (bench/lib/floors.ts: a bare Fastify route, a bare
// undici forwarder, the direct path), loaded by the same load generator in its own process (bench/lib/loadgen.ts).
// It reports and never gates: the exit code is 0 whatever the verdict, non-zero only on errors.
//
// Environment: BENCH_CALLS (3000), BENCH_WARMUP (500), BENCH_SECONDS (5), BENCH_CONCURRENCY (64),
// BENCH_ROUNDS (2), BENCH_GATEWAY (child | inprocess), BENCH_GATEWAY_LOG_LEVEL (warn),
// BENCH_GATEWAY_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"), BENCH_STORE (memory | sqlite),
// BENCH_MAX_CONCURRENT_CALLS, BENCH_TASKS_IN_FLIGHT (1000), BENCH_TASK_CREATES (2000),
// BENCH_MEMORY_TASKS (10000), BENCH_REDIS_URL (the Redis of the redis-store measurements; default
// REDIS_URL, else redis://127.0.0.1:6379; without one they are skipped), BENCH_POSTGRES_URL (the same for
// the postgres store; default POSTGRES_URL, else postgres://postgres@127.0.0.1:5432/postgres), BENCH_STORES
// (comma-separated stores of the task sections: memory, sqlite, redis, postgres; default all four), BENCH_SECTIONS
// (comma-separated ids), BENCH_PROFILE_DIR (write V8 CPU profiles of the gateway during the measured
// windows; summarise with bench/tools/cpuprofile-top.ts), BENCH_METRICS (on | off: metrics of the gateways;
// section metrics-cost measures both; section tracing-cost measures tracing on vs off), BENCH_SCALE_TASKS
// (1000,10000,100000), BENCH_SCALE_SESSIONS (100,1000,5000), BENCH_SCALE_WATCHED (1000,10000), BENCH_SCALE_STDIO
// (10,50,100) and BENCH_SCALE_FIGURES (stored,sessions,watched,stdio): the sizes and figures of section scale,
// BENCH_OUT (results file).
import { execFileSync } from 'node:child_process'
import { mkdir, writeFile } from 'node:fs/promises'
import { cpus, loadavg } from 'node:os'
import { dirname } from 'node:path'
import { startGateway, type GatewayHandle } from './lib/gateway.ts'
import { closeAll, startDemoUpstream } from './lib/processes.ts'
import { printableUrl } from './lib/redis.ts'
import { readSettings } from './lib/settings.ts'
import { renderTable } from './lib/stats.ts'
import type { BenchContext, Check, SectionResult } from './lib/types.ts'
import { buildDist } from '../scripts/build.ts'
import { SECTIONS } from './sections/index.ts'

function log (message: string): void {
  process.stderr.write(`bench: ${message}\n`)
}

function gitRevision (): string | null {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() !== ''
    return dirty ? `${head}-dirty` : head
  } catch {
    return null
  }
}

let interrupted = false
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) return
    interrupted = true
    log(`${signal}: stopping child processes`)
    const exit = (): never => process.exit(signal === 'SIGINT' ? 130 : 143)
    closeAll().then(exit, exit)
  })
}

async function main (): Promise<void> {
  const settings = readSettings()
  // The gateway and the demo upstream run compiled, as they ship (not through tsx, whose loader and keepNames wrappers cost CPU).
  await buildDist()
  const selected = settings.sections === undefined ? SECTIONS : SECTIONS.filter((s) => settings.sections!.includes(s.id))
  const unknown = (settings.sections ?? []).filter((id) => !SECTIONS.some((s) => s.id === id))
  if (unknown.length > 0) throw new Error(`unknown BENCH_SECTIONS ${unknown.join(', ')}; known: ${SECTIONS.map((s) => s.id).join(', ')}`)

  const environment = {
    date: new Date().toISOString(),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    loadavg: loadavg(),
    git: gitRevision(),
  }
  process.stdout.write(`mcp-task-gateway bench — node ${environment.node}, ${environment.cpus} × ${environment.cpuModel}, git ${environment.git ?? '?'}, load average ${environment.loadavg.map((l) => l.toFixed(2)).join(' ')}\n`)
  if (environment.loadavg[0]! > 0.5) process.stdout.write('warning: the machine is already busy (1-minute load average > 0.5); numbers will be noisy\n')
  process.stdout.write(`settings: calls=${settings.calls} warmup=${settings.warmup} seconds=${settings.seconds} concurrency=${settings.concurrency} ` +
    `rounds=${settings.rounds} gateway=${settings.gatewayMode} log-level=${settings.gatewayLogLevel} store=${settings.store} ` +
    `tasks-in-flight=${settings.tasksInFlight} task-creates=${settings.taskCreates} memory-tasks=${settings.memoryTasks} redis=${printableUrl(settings.redisUrl)} postgres=${printableUrl(settings.postgresUrl)}` +
    `${settings.maxConcurrentCalls === undefined ? '' : ` maxConcurrentCalls=${settings.maxConcurrentCalls}`}` +
    `${settings.gatewayNodeArgs.length > 0 ? ` node-args="${settings.gatewayNodeArgs.join(' ')}"` : ''}` +
    `${settings.profileDir === undefined ? '' : ` profile-dir=${settings.profileDir}`}\n\n`)

  log('starting the demo upstream (Streamable HTTP)')
  const upstream = await startDemoUpstream()
  let shared: Promise<GatewayHandle> | undefined
  const ctx: BenchContext = {
    settings,
    upstream,
    gateway: () => {
      shared ??= (log(`starting the gateway (${settings.gatewayMode})`), startGateway(settings, { upstreamUrl: upstream.url }))
      return shared
    },
    startGateway: (options) => startGateway(settings, { ...options, upstreamUrl: upstream.url }),
    log,
  }

  const results: Record<string, SectionResult & { title: string }> = {}
  const checks: Array<Check & { section: string }> = []
  for (const section of selected) {
    log(`section ${section.id}: ${section.title}`)
    const result = await section.run(ctx)
    results[section.id] = { title: section.title, ...result }
    checks.push(...result.checks.map((c) => ({ section: section.id, ...c })))
    process.stdout.write(`== ${section.title} ==\n\n`)
    for (const table of result.tables) process.stdout.write(`${renderTable(table)}\n\n`)
    for (const note of result.notes) process.stdout.write(`  · ${note}\n`)
    process.stdout.write('\n')
  }

  const budgetWidth = Math.max(...checks.map((c) => c.budget.length))
  process.stdout.write('== Verdict (design.md §4 budgets) ==\n\n')
  for (const check of checks) {
    const mark = check.pass === undefined ? 'N/A ' : check.pass ? 'PASS' : 'FAIL'
    process.stdout.write(`  ${mark}  ${check.budget.padEnd(budgetWidth)}  ${check.measured.padStart(10)}  (budget ${check.limit})\n`)
  }
  const failed = checks.filter((c) => c.pass === false).length
  process.stdout.write(`\n  ${failed === 0 ? 'all measured budgets met' : `${failed} of ${checks.length} budgets missed`} (the bench reports; it does not gate)\n`)

  await mkdir(dirname(settings.out), { recursive: true })
  await writeFile(settings.out, JSON.stringify({ environment, settings: { ...settings, redisUrl: printableUrl(settings.redisUrl), postgresUrl: printableUrl(settings.postgresUrl) }, checks, sections: results }, null, 2) + '\n')
  process.stdout.write(`\nresults: ${settings.out}\n`)
}

let code = 0
try {
  await main()
} catch (err) {
  code = 1
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
} finally {
  await closeAll()
}
process.exit(interrupted ? 130 : code)
