// The floors a budget is a ratio to, started by the bench as child processes like the gateway
// (bench/lib/floor-server.mjs) and measured in the same run, by the same load generator (loadgen.ts):
// - a bare Fastify route answering the gateway's own `tasks/get` answer (the floor of tasks/get throughput);
// - a bare undici forwarder between the client and the demo upstream (the floor of one extra hop: sync tools/call).
// The direct path, client → upstream, is the third floor; it needs no process of its own.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { REPO_ROOT } from '../../test/fixtures/spawn-upstream.ts'
import { PROBE, procCpuMs, track, watchChild } from './processes.ts'

const SCRIPT = fileURLToPath(new URL('./floor-server.mjs', import.meta.url))
const READY_TIMEOUT_MS = 20_000
const KILL_GRACE_MS = 5000

export interface FloorHandle {
  /** What it is, for tables and the JSON results. */
  name: string
  /** `http://127.0.0.1:<port>/mcp` */
  url: string
  pid: number | undefined
  /** CPU time (user + system, ms) of the floor process so far. */
  cpuMs (): number | undefined
  close (): Promise<void>
}

async function startFloor (name: string, args: string[]): Promise<FloorHandle> {
  const child = spawn(process.execPath, ['--import', PROBE, SCRIPT, ...args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: process.env })
  let port: number | undefined
  const watched = watchChild(child, name, (line) => {
    const match = /^listening (\d+)$/.exec(line.trim())
    if (match !== null) port ??= Number(match[1])
  })
  const close = track(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS)
    await watched.exited
    clearTimeout(timer)
  })
  const deadline = Date.now() + READY_TIMEOUT_MS
  for (;;) {
    if (port !== undefined) break
    const reason = watched.exitReason()
    if (reason !== undefined) throw new Error(reason)
    if (Date.now() > deadline) {
      await close()
      throw new Error(`${name} did not print "listening <port>" within ${READY_TIMEOUT_MS} ms\n${watched.output()}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return { name, url: `http://127.0.0.1:${port}/mcp`, pid: child.pid, cpuMs: () => procCpuMs(child.pid), close }
}

/** One answer of the gateway, as the Fastify floor replays it. */
export interface AnswerTemplate {
  contentType: string
  /** The JSON-RPC answer (out of its SSE event when it came as one). */
  answer: Record<string, unknown>
}

/**
 * A bare Fastify route answering POST /mcp with `template`'s JSON-RPC answer (its id replaced by the request's),
 * in the template's content type (an SSE body is sent as one `message` event).
 */
export async function startFastifyFloor (template: AnswerTemplate): Promise<FloorHandle> {
  return await startFloor('fastify floor', ['fastify', JSON.stringify(template)])
}

/** A bare undici forwarder in front of `upstreamUrl`'s origin, with a keep-alive pool of `connections` sockets. */
export async function startForwarder (upstreamUrl: string, connections: number): Promise<FloorHandle> {
  return await startFloor('forwarder floor', ['forward', new URL(upstreamUrl).origin, String(connections)])
}
