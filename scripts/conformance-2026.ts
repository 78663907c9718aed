/**
 * Runs the 2026-07-28 server scenarios of the official MCP conformance suite (0.2.0 prerelease) against the
 * gateway, with its default `tasks.decide`, fronting test/fixtures/conformance-2026-upstream.ts over stdio, with
 * pass-through names: a plain legacy-era server (v1 SDK McpServer, no tasks, nothing timed for a gateway: its
 * tools ask and end at once). The suite needs Node 22, which `npx` fetches from the npm registry.
 *
 *   tsx scripts/conformance-2026.ts                      every scenario of the 2026-07-28 wire (see below)
 *   tsx scripts/conformance-2026.ts --scenario <name>    one scenario, tasks-* included
 *
 * Without arguments it makes two kinds of runs, because `--spec-version 2026-07-28` alone selects only the
 * 20 "active" scenarios, and never the tasks extension's (they are tagged `extension`, and pending):
 *   1. `--suite all --spec-version 2026-07-28`: the 40 scenarios on the 2026 timeline (MRTR, server-stateless,
 *      caching, SEP-2243 headers, and the carried-over tools/resources/prompts ones);
 *   2. each `tasks-*` scenario the suite lists, with `--spec-version 2026-07-28 --force`.
 * Arguments are passed on to a single run instead (with `--spec-version 2026-07-28 --force`).
 * `--expected-failures conformance/expected-failures-2026.yml` is added when that file exists.
 * Exit code: non-zero when any run failed.
 */
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parseConfig } from '../src/config/load.ts'
import { buildGateway } from '../src/gateway.ts'
import { principalClient } from '../src/upstream/client-ref.ts'

const SUITE = '@modelcontextprotocol/conformance@0.2.0-alpha.12'
const SPEC_VERSION = '2026-07-28'
const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url))
const EXPECTED_FAILURES = fileURLToPath(new URL('../conformance/expected-failures-2026.yml', import.meta.url))
const FIXTURE = fileURLToPath(new URL('../test/fixtures/conformance-2026-upstream.ts', import.meta.url))

const config = parseConfig({
  server: { port: 0 },
  store: { kind: 'memory' },
  logging: { level: 'warn' },
  upstreams: [{
    name: 'conformance',
    transport: 'stdio',
    prefix: '',
    command: process.execPath,
    args: ['--import', 'tsx', FIXTURE],
    cwd: REPO_ROOT,
    // What the tasks-* scenarios expect of each tool, said as an operator says it (the server declares no task
    // support): greet is sync-only; failing_job and test_tool_with_task run only as tasks
    // (tasks-required-task-error, tasks-mrtr-composition), and so does protocol_error_job, whose JSON-RPC error
    // tasks-lifecycle expects as a failed task although it comes at once; every other tool is optional.
    toolSettings: {
      greet: { taskSupport: 'forbidden' },
      failing_job: { taskSupport: 'required' },
      protocol_error_job: { taskSupport: 'required' },
      test_tool_with_task: { taskSupport: 'required' },
    },
  }],
})

/** Runs the suite's CLI; resolves with its exit code and, when `capture` is set, its stdout. */
function conformance (args: string[], capture = false): Promise<{ code: number, stdout: string }> {
  const child = spawn('npx', ['-y', '-p', 'node@22', '-p', SUITE, 'conformance', ...args], {
    stdio: ['ignore', capture ? 'pipe' : 'inherit', 'inherit'],
  })
  let stdout = ''
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
  return new Promise((resolve) => {
    child.on('exit', (exitCode, signal) => resolve({ code: exitCode ?? (signal ? 1 : 0), stdout }))
    child.on('error', () => resolve({ code: 1, stdout }))
  })
}

/** The tasks extension's server scenarios, as `conformance list --server` names them. */
async function tasksScenarios (): Promise<string[]> {
  const { code, stdout } = await conformance(['list', '--server'], true)
  const names = [...stdout.matchAll(/^\s*-\s+(tasks-[\w-]+)\s+\[extension\]\s*$/gm)].map(match => match[1] as string)
  if (code !== 0 || names.length === 0) throw new Error(`conformance list --server found no tasks-* scenarios (exit ${code})`)
  return names
}

const expected = existsSync(EXPECTED_FAILURES) ? ['--expected-failures', EXPECTED_FAILURES] : []
const userArgs = process.argv.slice(2)

const gateway = await buildGateway(config)
await gateway.ready
let failed = false
try {
  // A few probes allow a call 500–600 ms to produce its first frame; the first call of a client (the suite's
  // requests carry no credentials, so each capability set is one client) first starts a stdio process of the
  // fixture, which can take longer on a busy machine. Open the sessions those probes use now (they stay open
  // until idle), so the suite measures the gateway.
  for (const capabilities of [{}, { elicitation: {} }]) {
    const lease = await gateway.upstreams[0]!.acquire(principalClient('anonymous', capabilities), 'call')
    lease.release()
  }
  const address = await gateway.app.listen({ host: '127.0.0.1', port: 0 })
  const url = `${address}${config.server.path}`
  process.stderr.write(`conformance-2026: gateway on ${url}\n`)
  const server = ['server', '--url', url, '--spec-version', SPEC_VERSION]
  const runs = userArgs.length > 0
    ? [[...server, '--force', ...expected, ...userArgs]]
    : [
        [...server, '--suite', 'all', ...expected],
        ...(await tasksScenarios()).map(name => [...server, '--scenario', name, '--force', ...expected]),
      ]
  for (const args of runs) {
    const { code } = await conformance(args)
    if (code !== 0) {
      failed = true
      process.stderr.write(`conformance-2026: exit ${code} for ${args.slice(4).join(' ')}\n`)
    }
  }
} catch (error) {
  failed = true
  process.stderr.write(`conformance-2026: ${error instanceof Error ? error.message : String(error)}\n`)
} finally {
  await gateway.close()
}
process.exit(failed ? 1 : 0)
