/**
 * The gateway as the client under test of the MCP conformance suite's client scenarios: the suite starts a
 * test server and runs this script with its URL as the last argument. The script starts a gateway whose only
 * upstream is that server (Streamable HTTP, names passed through) and has an SDK client call, through the
 * gateway, what the scenario asks for; what the test server sees is the gateway's upstream transport.
 *
 *   npm run conformance:client                               the scenarios below, 0.1.16 suite
 *   npm run conformance:client -- --scenario sse-retry       one of them
 *
 * Run by the suite (it sets MCP_CONFORMANCE_SCENARIO): tsx scripts/conformance-client.ts <server url>.
 * Scenarios: `sse-retry` (the server closes the call's stream after a priming event with `retry: 500`; the
 * gateway must wait that long and reconnect with Last-Event-ID, and take the answer from the resumed stream).
 */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { parseConfig } from '../src/config/load.ts'
import { buildGateway } from '../src/gateway.ts'

const SUITE = '@modelcontextprotocol/conformance@0.1.16'
/** What the client calls through the gateway in each scenario this script runs. */
const CALLS: Readonly<Record<string, { tool: string, arguments: Record<string, unknown> }>> = {
  'sse-retry': { tool: 'test_reconnection', arguments: {} },
}

/** Run by the suite: the gateway in front of the scenario's server, and one call through it. */
async function runAsClient (serverUrl: string, scenario: string): Promise<void> {
  const call = CALLS[scenario]
  if (call === undefined) throw new Error(`scenario '${scenario}' is not one this script runs (${Object.keys(CALLS).join(', ')})`)
  const config = parseConfig({
    server: { port: 0 },
    store: { kind: 'memory' },
    logging: { level: 'warn' },
    upstreams: [{ name: 'scenario', transport: 'streamable-http', url: serverUrl, prefix: '', era: 'legacy' }],
  })
  const gateway = await buildGateway(config)
  try {
    await gateway.ready
    const address = await gateway.app.listen({ host: '127.0.0.1', port: 0 })
    const client = new Client({ name: 'conformance-through-gateway', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${address}${config.server.path}`)))
    const result = await client.callTool({ name: call.tool, arguments: call.arguments })
    process.stdout.write(`${JSON.stringify(result)}\n`)
    await client.close()
  } finally {
    await gateway.close()
  }
}

/** Run by hand or CI: the suite's `client` command for each scenario, with this script as the client. */
async function runSuite (scenarios: string[]): Promise<number> {
  const self = fileURLToPath(import.meta.url)
  let failed = 0
  for (const scenario of scenarios) {
    const command = `${process.execPath} --import tsx ${self}`
    const child = spawn('npx', ['-y', '-p', 'node@22', '-p', SUITE, 'conformance', 'client', '--command', command, '--scenario', scenario], {
      stdio: 'inherit',
    })
    const code = await new Promise<number>((resolve) => {
      child.on('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 1 : 0)))
      child.on('error', () => resolve(1))
    })
    if (code !== 0) failed++
  }
  return failed === 0 ? 0 : 1
}

const args = process.argv.slice(2)
const scenario = process.env.MCP_CONFORMANCE_SCENARIO
if (scenario !== undefined && args.length === 1 && /^https?:\/\//.test(args[0]!)) {
  await runAsClient(args[0]!, scenario).then(() => process.exit(0), (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
    process.exit(1)
  })
} else {
  const at = args.indexOf('--scenario')
  process.exit(await runSuite(at === -1 ? Object.keys(CALLS) : [args[at + 1] ?? '']))
}
