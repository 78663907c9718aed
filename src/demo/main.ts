#!/usr/bin/env node
/**
 * CLI entry of the demo upstream.
 *
 *   node dist/demo/main.js                      # stdio (default)
 *   node dist/demo/main.js --http 0             # Streamable HTTP on 127.0.0.1, free port
 *   node dist/demo/main.js --http 8931 --host 0.0.0.0
 *   tsx src/demo/main.ts --http 8931
 *
 * In HTTP mode the endpoint is `http://<host>:<port>/mcp` and, once the
 * server accepts connections, exactly one line `listening <port>` is written
 * to stdout. Everything else (diagnostics) goes to stderr, because in stdio
 * mode stdout is the protocol channel.
 *
 * Its state (resource revisions, tool availability) lives in the process's
 * memory, like a real server's: each stdio process has its own, and the HTTP
 * server's sessions share one.
 */
import { parseArgs } from 'node:util'
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio'
import { oneSendAtATime } from '../upstream/one-send-at-a-time.ts'
import { startDemoHttpServer } from './demo-http.ts'
import { createDemoServer, createDemoWorld, stderrLog } from './demo-server.ts'

const USAGE = `Usage: demo [--http <port>] [--host <address>] [--path <path>]

Serves the gateway's demo MCP server.
  (no options)       serve over stdio
  --http <port>      serve Streamable HTTP (sessionful) instead; 0 = any free port
  --host <address>   bind address for --http (default 127.0.0.1)
  --path <path>      endpoint path for --http (default /mcp)
  -h, --help         show this help
`

interface CliOptions {
  httpPort?: number
  host: string
  path: string
}

function parseCli (argv: string[]): CliOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      http: { type: 'string' },
      host: { type: 'string', default: '127.0.0.1' },
      path: { type: 'string', default: '/mcp' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  })
  if (values.help) {
    process.stderr.write(USAGE)
    process.exit(0)
  }
  const options: CliOptions = { host: values.host, path: values.path }
  if (values.http !== undefined) {
    const port = Number(values.http)
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--http expects a port number (0-65535), got "${values.http}"`)
    options.httpPort = port
  }
  if (!options.path.startsWith('/')) throw new Error(`--path must start with "/", got "${options.path}"`)
  return options
}

/** Installs SIGINT/SIGTERM handlers that run `close` once, then exit. */
function exitOnSignals (close: () => Promise<void>): void {
  let closing = false
  const onSignal = (signal: NodeJS.Signals): void => {
    if (closing) return
    closing = true
    stderrLog(`received ${signal}, shutting down`)
    const force = setTimeout(() => { process.exit(1) }, 3000)
    force.unref()
    close().then(
      () => { process.exit(0) },
      (error: unknown) => {
        stderrLog(`shutdown failed: ${error instanceof Error ? error.message : String(error)}`)
        process.exit(1)
      },
    )
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
}

async function main (): Promise<void> {
  const options = parseCli(process.argv.slice(2))
  // One world per process: all HTTP sessions share the tool list and resource state.
  const world = createDemoWorld(stderrLog)

  if (options.httpPort === undefined) {
    // Hand-wired on purpose, not `serveStdio()`: that entry would let a client that probes
    // `server/discover` pin the 2026-07-28 era, where the push-style server→client requests of
    // ask_user, ask_url, summarize and list_roots are not allowed. Wired like this the server
    // speaks only the 2025 era (initialize), and probing clients fall back to it.
    const server = createDemoServer({ world })
    const transport = new StdioServerTransport()
    oneSendAtATime(transport)
    await server.connect(transport)
    exitOnSignals(() => server.close())
    stderrLog('serving over stdio')
    return
  }

  const http = await startDemoHttpServer({
    host: options.host,
    port: options.httpPort,
    path: options.path,
    createServer: () => createDemoServer({ world }),
    log: stderrLog,
  })
  exitOnSignals(async () => { await http.close() })
  stderrLog(`serving Streamable HTTP at ${http.url}`)
  process.stdout.write(`listening ${http.port}\n`)
}

main().catch((error: unknown) => {
  stderrLog(`fatal: ${error instanceof Error ? error.message : String(error)}`)
  process.exit(1)
})
