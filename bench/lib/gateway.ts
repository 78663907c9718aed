// Starts a gateway in front of the demo upstream (or of a stdio command) for a bench run: by default as
// its own process (`node dist/main.js`, compiled as it ships, with bench/lib/child-probe.mjs preloaded to report
// its event-loop delay, CPU, memory and CPU profiles over IPC), or in the bench process
// (BENCH_GATEWAY=inprocess).
import { spawn } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { request } from 'undici'
import { stringify } from 'yaml'
import { parseConfig } from '../../src/config/load.ts'
import { buildGateway } from '../../src/gateway.ts'
import { loggerOptions } from '../../src/observability/logger.ts'
import { REPO_ROOT } from '../../test/fixtures/spawn-upstream.ts'
import { PROBE, freePort, track, watchChild } from './processes.ts'
import type { Settings } from './settings.ts'

const KILL_GRACE_MS = 15_000
const READY_TIMEOUT_MS = 120_000

export interface ProbeStats {
  maxLoopDelayMs: number
  p99LoopDelayMs: number
  /** The longest garbage-collection pause of the window (a loop stall of about that length is the collector's). */
  maxGcPauseMs: number
  cpuMs: number
  rssBytes: number
  heapUsedBytes: number
}

export interface GatewayHandle {
  /** `http://127.0.0.1:<port>/mcp` */
  url: string
  mode: Settings['gatewayMode']
  pid: number | undefined
  /** The raw configuration the gateway was started with. */
  config: Record<string, unknown>
  /** Starts a new measurement window of the gateway-side stats. */
  resetStats (): Promise<void>
  /** Gateway-side stats since the last reset (`gc`: collect garbage first); undefined when the gateway runs in-process. */
  readStats (options?: { gc?: boolean }): Promise<ProbeStats | undefined>
  /** V8 CPU profiling of the gateway process; only a child gateway can be profiled alone. */
  readonly canProfile: boolean
  startProfile (): Promise<void>
  /** Stops profiling and writes the profile (.cpuprofile JSON) to `file`. */
  stopProfile (file: string): Promise<void>
  /** Distinct lines the gateway wrote on stderr (Node warnings and the like; its log goes to stdout). */
  stderrLines (): string[]
  close (): Promise<void>
}

export interface GatewayOptions {
  upstreamUrl: string
  /**
   * A stdio upstream instead of the one at `upstreamUrl`: the gateway spawns `command args` for each
   * upstream session (its own, plus one per client with `sessions: per-client`).
   */
  stdio?: { command: string, args: string[] }
  /**
   * Replaces the store section (default from settings); `'memory'` or `'sqlite'` picks that kind, the
   * sqlite file being a fresh one in the gateway's temp directory (deleted when it closes).
   */
  store?: Record<string, unknown> | 'memory' | 'sqlite'
  /** Merged into the upstream entry. */
  upstream?: Record<string, unknown>
  /** Merged into the server section. */
  server?: Record<string, unknown>
  /** The tasks section (limits such as maxActivePerPrincipal). */
  tasks?: Record<string, unknown>
  /** The limits section (sessions, streams, connections). */
  limits?: Record<string, unknown>
  /** The metrics section; default: enabled as BENCH_METRICS says. */
  metrics?: Record<string, unknown>
  /** The tracing section; default: off. */
  tracing?: Record<string, unknown>
  /** The auth section; default: off. */
  auth?: Record<string, unknown>
}

async function waitReady (base: string, failed: () => string | undefined): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS
  for (;;) {
    const reason = failed()
    if (reason !== undefined) throw new Error(reason)
    try {
      const res = await request(`${base}/readyz`)
      const body = await res.body.json() as { status?: string }
      if (res.statusCode === 200 && body.status === 'ready') return
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`gateway at ${base} was not ready within ${READY_TIMEOUT_MS} ms`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/** Starts a gateway in front of one upstream named `demo` (by default the demo upstream), as configured by `settings.gatewayMode`. */
export async function startGateway (settings: Settings, options: GatewayOptions): Promise<GatewayHandle> {
  const dir = await mkdtemp(join(tmpdir(), 'mcp-gw-bench-'))
  const kind = typeof options.store === 'string' ? options.store : settings.store
  const raw: Record<string, unknown> = {
    server: { host: '127.0.0.1', ...options.server },
    logging: { level: settings.gatewayLogLevel },
    store: typeof options.store === 'object' ? options.store : kind === 'sqlite' ? { kind: 'sqlite', path: join(dir, 'gateway.db') } : { kind: 'memory' },
    ...(options.tasks !== undefined && { tasks: options.tasks }),
    ...(options.limits !== undefined && { limits: options.limits }),
    metrics: options.metrics ?? { enabled: settings.metrics === 'on' },
    ...(options.tracing !== undefined && { tracing: options.tracing }),
    ...(options.auth !== undefined && { auth: options.auth }),
    upstreams: [{
      name: 'demo',
      ...(options.stdio === undefined
        ? { transport: 'streamable-http', url: options.upstreamUrl }
        : { transport: 'stdio', command: options.stdio.command, args: options.stdio.args }),
      ...(settings.maxConcurrentCalls !== undefined && { maxConcurrentCalls: settings.maxConcurrentCalls }),
      ...options.upstream,
    }],
  }
  const config = parseConfig(raw, {}, 'bench configuration') // fail early, in this process, on a bad config
  try {
    return settings.gatewayMode === 'inprocess'
      ? await startInProcess(raw, config, dir)
      : await startChild(settings, raw, dir)
  } catch (err) {
    await rm(dir, { recursive: true, force: true })
    throw err
  }
}

async function startInProcess (raw: Record<string, unknown>, config: ReturnType<typeof parseConfig>, dir: string): Promise<GatewayHandle> {
  const logger = pino(loggerOptions(config.logging), pino.destination(2))
  const gateway = await buildGateway(config, { logger })
  const close = track(async () => {
    await gateway.close()
    await rm(dir, { recursive: true, force: true })
  })
  let address: string
  try {
    address = await gateway.app.listen({ host: '127.0.0.1', port: 0 })
    await waitReady(address, () => undefined)
  } catch (err) {
    await close()
    throw err
  }
  return {
    url: `${address}${config.server.path}`,
    mode: 'inprocess',
    pid: process.pid,
    config: raw,
    resetStats: async () => {},
    readStats: async () => undefined,
    canProfile: false,
    stderrLines: () => [],
    startProfile: async () => { throw new Error('an in-process gateway cannot be profiled apart from the bench') },
    stopProfile: async () => { throw new Error('an in-process gateway cannot be profiled apart from the bench') },
    close,
  }
}

async function startChild (settings: Settings, raw: Record<string, unknown>, dir: string): Promise<GatewayHandle> {
  const file = join(dir, 'gateway.yaml')
  await writeFile(file, stringify(raw))
  // `gateway listening` is logged at info, so below info the port cannot be learnt from the log:
  // then pick a free port here and pass it (a small race, reported as an error if it is lost).
  const logsListening = ['info', 'debug', 'trace'].includes(settings.gatewayLogLevel)
  const port = logsListening ? 0 : await freePort()
  const args = [
    '--expose-gc', ...settings.gatewayNodeArgs, '--import', PROBE,
    'dist/main.js', '--config', file, '--port', String(port), '--log-level', settings.gatewayLogLevel,
  ]
  const child = spawn(process.execPath, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe', 'ipc'], env: process.env })
  let address: string | undefined
  const watched = watchChild(child, 'gateway', (line) => {
    if (address === undefined && line.includes('gateway listening')) {
      try {
        address = (JSON.parse(line) as { address?: string }).address
      } catch {
        // not JSON
      }
    }
  })
  const { exited, exitReason } = watched

  const close = track(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS)
      await exited
      clearTimeout(timer)
    }
    await rm(dir, { recursive: true, force: true })
  })

  let seq = 0
  interface Reply { type?: string, seq?: number, stats?: ProbeStats, error?: string }
  const pending = new Map<number, (reply: Reply) => void>()
  child.on('message', (message: Reply) => {
    if (message.type !== 'bench-probe:reply' || message.seq === undefined) return
    pending.get(message.seq)?.(message)
    pending.delete(message.seq)
  })
  const ask = (type: string, extra: Record<string, unknown> = {}): Promise<ProbeStats | undefined> => new Promise((resolve, reject) => {
    const id = ++seq
    const timer = setTimeout(() => {
      pending.delete(id)
      reject(new Error(`gateway probe did not answer ${type}`))
    }, 30_000)
    pending.set(id, (reply) => {
      clearTimeout(timer)
      if (reply.error !== undefined) reject(new Error(`gateway probe, ${type}: ${reply.error}`))
      else resolve(reply.stats)
    })
    child.send({ ...extra, type, seq: id })
  })

  let base: string
  try {
    if (logsListening) {
      const deadline = Date.now() + READY_TIMEOUT_MS
      for (;;) {
        if (address !== undefined) break
        const reason = exitReason()
        if (reason !== undefined) throw new Error(reason)
        if (Date.now() > deadline) throw new Error(`gateway did not log 'gateway listening' within ${READY_TIMEOUT_MS} ms\n${watched.output()}`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      base = new URL(address as string).origin
    } else {
      base = `http://127.0.0.1:${port}`
    }
    await waitReady(base, exitReason)
  } catch (err) {
    await close()
    throw err
  }
  return {
    url: address ?? `${base}/mcp`,
    mode: 'child',
    pid: child.pid,
    config: raw,
    resetStats: async () => { await ask('bench-probe:reset') },
    readStats: (options = {}) => ask('bench-probe:read', { gc: options.gc === true }),
    canProfile: true,
    stderrLines: watched.stderrLines,
    startProfile: async () => { await ask('bench-probe:profile-start') },
    stopProfile: async (file) => { await ask('bench-probe:profile-stop', { file }) },
    close,
  }
}
