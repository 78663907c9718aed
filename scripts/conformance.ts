/**
 * Runs the official MCP conformance suite (server scenarios) against the gateway fronting the
 * project's conformance fixture upstream with pass-through names. The suite needs Node 22, which
 * `npx` fetches from the npm registry. Exit code: the suite's own (non-zero when a check fails).
 *
 *   npm run conformance [-- --scenario <name>]
 */
import { spawn } from 'node:child_process'
import { parseConfig } from '../src/config/load.ts'
import { buildGateway } from '../src/gateway.ts'

const SUITE = '@modelcontextprotocol/conformance@0.1.16'

const config = parseConfig({
  server: { port: 0 },
  store: { kind: 'memory' },
  logging: { level: 'warn' },
  upstreams: [{
    name: 'conformance',
    transport: 'stdio',
    prefix: '',
    command: process.execPath,
    args: ['--import', 'tsx', 'test/fixtures/conformance-upstream.ts'],
  }],
})

const gateway = await buildGateway(config)
await gateway.ready
const address = await gateway.app.listen({ host: '127.0.0.1', port: 0 })
const url = `${address}${config.server.path}`
process.stderr.write(`conformance: gateway on ${url}\n`)

const child = spawn('npx', ['-y', '-p', 'node@22', '-p', SUITE, 'conformance', 'server', '--url', url, ...process.argv.slice(2)], {
  stdio: 'inherit',
})
const code = await new Promise<number>((resolve) => {
  child.on('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 1 : 0)))
  child.on('error', () => resolve(1))
})
await gateway.close()
process.exit(code)
