// The two stdio-to-Streamable-HTTP bridges the gateway is compared with (stdio-peers section), each
// started as a child process in front of the same stdio command, on a free port of 127.0.0.1:
// - mcp-proxy: one upstream process shared by every client session, connected before it listens;
// - supergateway (--stateful): one upstream process (through `sh -c`) per client session, spawned at
//   the session's initialize.
// Neither logs a line once it accepts connections, so readiness is polled on their health routes.
import { spawn } from 'node:child_process'
import { request } from 'undici'
import { REPO_ROOT } from '../../test/fixtures/spawn-upstream.ts'
import { peerBinScript } from './peer-packages.ts'
import { PROBE, freePort, track, watchChild } from './processes.ts'
import { processTree, reapLeftovers } from './process-tree.ts'

const READY_TIMEOUT_MS = 30_000
const KILL_GRACE_MS = 15_000

export interface StdioCommand {
  command: string
  args: string[]
}

/** A Streamable HTTP front end of a stdio upstream, running as a child of the bench. */
export interface FrontEnd {
  /** `http://127.0.0.1:<port>/mcp` */
  url: string
  /** The front end's own process; its upstream processes are its descendants. */
  pid: number | undefined
  /** Distinct lines it wrote on stderr (warnings, upstream stderr it passes on). */
  stderrLines (): string[]
  /** Descendants still running after it exited, which the bench had to kill (none expected). */
  leftovers (): number
  close (): Promise<void>
}

interface PeerSpec {
  name: string
  /** The package's bin script, run with the bench's node and the probe preloaded. */
  script: string
  args (port: number): string[]
  /** Path answering 200 once the front end accepts MCP requests. */
  readyPath: string
  /** supergateway exits on EOF of its stdin, so it gets a pipe the bench never ends. */
  keepStdinOpen: boolean
}

/** The versions compared (installed on first use, see peer-packages.ts). */
const MCP_PROXY_VERSION = '6.7.19'
const SUPERGATEWAY_VERSION = '4.0.0'

/** A command line for `sh -c`, each word quoted so paths with spaces or quotes survive. */
function shellLine (upstream: StdioCommand): string {
  return [upstream.command, ...upstream.args].map((word) => `'${word.replaceAll("'", "'\\''")}'`).join(' ')
}

export async function startMcpProxy (upstream: StdioCommand): Promise<FrontEnd> {
  return await startPeer({
    name: `mcp-proxy ${MCP_PROXY_VERSION}`,
    script: await peerBinScript('mcp-proxy', MCP_PROXY_VERSION, 'mcp-proxy'),
    args: (port) => ['--host', '127.0.0.1', '--port', String(port), '--server', 'stream', '--', upstream.command, ...upstream.args],
    readyPath: '/ping',
    keepStdinOpen: false,
  })
}

/** supergateway has no host option: it listens on every interface, the bench only talks to 127.0.0.1. */
export async function startSupergateway (upstream: StdioCommand): Promise<FrontEnd> {
  return await startPeer({
    name: `supergateway ${SUPERGATEWAY_VERSION}`,
    script: await peerBinScript('supergateway', SUPERGATEWAY_VERSION, 'supergateway'),
    args: (port) => ['--stdio', shellLine(upstream), '--outputTransport', 'streamableHttp', '--stateful',
      '--port', String(port), '--logLevel', 'none', '--healthEndpoint', '/healthz'],
    readyPath: '/healthz',
    keepStdinOpen: true,
  })
}

async function startPeer (spec: PeerSpec): Promise<FrontEnd> {
  const port = await freePort()
  const child = spawn(process.execPath, ['--import', PROBE, spec.script, ...spec.args(port)], {
    cwd: REPO_ROOT,
    stdio: [spec.keepStdinOpen ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    env: process.env,
  })
  const { exited, exitReason, stderrLines } = watchChild(child, spec.name)

  let leftovers = 0
  const close = track(async () => {
    const descendants = child.pid === undefined ? [] : processTree(child.pid).slice(1)
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS)
      await exited
      clearTimeout(timer)
    }
    leftovers = (await reapLeftovers(descendants)).length
  })

  const base = `http://127.0.0.1:${port}`
  try {
    await waitReady(spec.name, `${base}${spec.readyPath}`, exitReason)
  } catch (err) {
    await close()
    throw err
  }
  return { url: `${base}/mcp`, pid: child.pid, stderrLines, leftovers: () => leftovers, close }
}

async function waitReady (name: string, url: string, failed: () => string | undefined): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS
  for (;;) {
    const reason = failed()
    if (reason !== undefined) throw new Error(reason)
    try {
      const res = await request(url)
      await res.body.dump()
      if (res.statusCode === 200) return
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${name} did not answer ${url} within ${READY_TIMEOUT_MS} ms`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}
