/**
 * Runs the official MCP conformance suite (server scenarios) against the gateway fronting the
 * project's conformance fixture upstream with pass-through names. The suite needs Node 22, which
 * `npx` fetches from the npm registry. Exit code: the suite's own (non-zero when a check fails).
 *
 *   npm run conformance [-- --scenario <name>]
 *   npm run conformance -- --upstream http [--scenario <name>]
 *
 * The fixture runs over stdio by default. With `--upstream http` it runs as a Streamable HTTP server (sessions,
 * priming events with `retry:`, Last-Event-ID replay: the suite's reference server), so that what depends on
 * the upstream's HTTP transport is tested through the gateway too: `server-sse-polling`, whose tool closes
 * its upstream stream mid-call, passes only when the gateway resumes it.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createInterface } from 'node:readline'
import { parseConfig } from '../src/config/load.ts'
import { buildGateway } from '../src/gateway.ts'

const SUITE = '@modelcontextprotocol/conformance@0.1.16'
const FIXTURE = 'test/fixtures/conformance-upstream.ts'

const args = process.argv.slice(2)
const at = args.indexOf('--upstream')
const transport = at === -1 ? 'stdio' : args.splice(at, 2)[1]
if (transport !== 'stdio' && transport !== 'http') {
  process.stderr.write('usage: conformance.ts [--upstream stdio|http] [suite arguments]\n')
  process.exit(2)
}

/** The fixture as an HTTP server on a free port: the process, and its URL once it printed `listening <port>`. */
async function startHttpFixture (): Promise<{ child: ChildProcess, url: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, '--http', '0'], { stdio: ['ignore', 'pipe', 'inherit'] })
  const port = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const match = /^listening (\d+)$/.exec(line.trim())
      if (match?.[1] !== undefined) resolve(match[1])
    })
    child.once('exit', (code) => { reject(new Error(`${FIXTURE} exited before listening (code ${String(code)})`)) })
  })
  return { child, url: `http://127.0.0.1:${port}/mcp` }
}

const http = transport === 'http' ? await startHttpFixture() : undefined
const upstream = http === undefined
  ? { transport: 'stdio', command: process.execPath, args: ['--import', 'tsx', FIXTURE] }
  : { transport: 'streamable-http', url: http.url, era: 'legacy' }

const config = parseConfig({
  server: { port: 0 },
  store: { kind: 'memory' },
  logging: { level: 'warn' },
  upstreams: [{ name: 'conformance', prefix: '', ...upstream }],
})

const gateway = await buildGateway(config)
await gateway.ready
const address = await gateway.app.listen({ host: '127.0.0.1', port: 0 })
const url = `${address}${config.server.path}`
process.stderr.write(`conformance: gateway on ${url}, upstream over ${transport}\n`)

const child = spawn('npx', ['-y', '-p', 'node@22', '-p', SUITE, 'conformance', 'server', '--url', url, ...args], {
  stdio: 'inherit',
})
const code = await new Promise<number>((resolve) => {
  child.on('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 1 : 0)))
  child.on('error', () => resolve(1))
})
await gateway.close()
http?.child.kill('SIGTERM')
process.exit(code)
