// The stdio echo upstream of the stdio-peers section (echo-stdio-server.mjs): the one command every
// front end spawns, and its start time measured without any front end, the floor a new client's first
// call through a front end that spawns a process for it cannot go below.
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import type { StdioCommand } from './peer-front-ends.ts'
import { PROBE, forgetPid, registerPid, track } from './processes.ts'

const ECHO_SERVER = fileURLToPath(new URL('./echo-stdio-server.mjs', import.meta.url))
const START_TIMEOUT_MS = 30_000

/**
 * How every front end starts the echo server: the bench's node, with the probe preloaded so an echo
 * server whose front end died exits too; no TypeScript loader (the server is plain JavaScript).
 */
export function echoCommand (): StdioCommand {
  return { command: process.execPath, args: ['--import', PROBE, ECHO_SERVER] }
}

/**
 * Spawns the echo server over stdio with an SDK v1 client and returns the ms from the spawn to the
 * initialize result (the client's `notifications/initialized`, a write with no answer, is included).
 */
export async function echoStartMs (): Promise<number> {
  const { command, args } = echoCommand()
  // stderr ignored: the probe's pid line would land on the bench's stderr.
  const transport = new StdioClientTransport({ command, args, stderr: 'ignore' })
  const client = new Client({ name: 'mcp-task-gateway-bench', version: '0.0.0' })
  let pid: number | undefined
  const close = track(async () => {
    await client.close()
    forgetPid(pid)
  })
  try {
    const started = performance.now()
    await client.connect(transport, { timeout: START_TIMEOUT_MS })
    const elapsed = performance.now() - started
    pid = transport.pid ?? undefined
    registerPid(pid)
    const echoed = await client.callTool({ name: 'echo', arguments: { text: 'start' } })
    const content = echoed.content as Array<{ text?: string }> | undefined
    if (content?.[0]?.text !== 'start') throw new Error(`echo server: unexpected echo ${JSON.stringify(echoed).slice(0, 300)}`)
    return elapsed
  } finally {
    await close()
  }
}
