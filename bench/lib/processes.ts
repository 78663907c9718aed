// Child processes of a bench run and their clean-up: every child is registered, closed gracefully by
// `closeAll()`, killed on process exit if still alive, and exits by itself when the bench dies
// (bench/lib/child-probe.mjs). Also starts the demo upstream; the gateway is in gateway.ts.
import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { createInterface } from 'node:readline'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { startUpstream } from '../../test/fixtures/spawn-upstream.ts'

/** file: URL of the preload every child gets (see child-probe.mjs). */
export const PROBE = pathToFileURL(fileURLToPath(new URL('./child-probe.mjs', import.meta.url))).href
/** USER_HZ: the unit of utime/stime in /proc/<pid>/stat; 100 on every mainstream Linux. */
const CLOCK_TICKS_PER_SECOND = 100

// ── clean-up registry ──────────────────────────────────────────────────────────────────────────────
const closers: Array<() => Promise<void>> = []
const livePids = new Set<number>()

/** Children still alive at exit are SIGKILLed (only these pids, never by name). */
export function registerPid (pid: number | undefined): void {
  if (pid !== undefined) livePids.add(pid)
}

export function forgetPid (pid: number | undefined): void {
  if (pid !== undefined) livePids.delete(pid)
}

process.on('exit', () => {
  for (const pid of livePids) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // already gone
    }
  }
})

let closingAll: Promise<void> | undefined

/** Closes everything started so far, newest first; never throws. Concurrent calls share one pass. */
export function closeAll (): Promise<void> {
  closingAll ??= (async () => {
    for (const close of closers.splice(0).reverse()) await close().catch((err: unknown) => { process.stderr.write(`bench: clean-up failed: ${String(err)}\n`) })
  })().finally(() => { closingAll = undefined })
  return closingAll
}

/** Registers a clean-up step for `closeAll()`; the returned function runs it at most once. */
export function track (close: () => Promise<void>): () => Promise<void> {
  let closing: Promise<void> | undefined
  const once = (): Promise<void> => {
    closing ??= close()
    return closing
  }
  closers.push(once)
  return once
}

/** CPU time (user + system, ms) of a process from /proc; undefined where /proc is not available. */
export function procCpuMs (pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) * 1000 / CLOCK_TICKS_PER_SECOND
  } catch {
    return undefined
  }
}

/**
 * A port free on 127.0.0.1 right now, for a child that cannot report the port it bound (a small race:
 * the child fails to listen if something takes the port first, and the bench reports that).
 */
export async function freePort (): Promise<number> {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const address = server.address()
  await new Promise((resolve) => server.close(resolve))
  if (address === null || typeof address === 'string') throw new Error('could not pick a free port')
  return address.port
}

// ── demo upstream ──────────────────────────────────────────────────────────────────────────────────
/** What a bench child said and how it ended, for error messages and the report. */
export interface WatchedChild {
  /** Its last output lines, stdout and stderr mixed. */
  output (): string
  /** Its first distinct stderr lines (the probe's own line left out). */
  stderrLines (): string[]
  /** Why it is gone, once it exited or could not be spawned. */
  exitReason (): string | undefined
  exited: Promise<unknown>
}

const OUTPUT_CHARS = 20_000
const STDERR_LINES = 50

/** Registers a spawned child for clean-up and keeps what it says; `onStdout` sees each stdout line too. */
export function watchChild (child: ChildProcess, name: string, onStdout?: (line: string) => void): WatchedChild {
  registerPid(child.pid)
  let output = ''
  const keep = (line: string): void => { output = (output + line + '\n').slice(-OUTPUT_CHARS) }
  createInterface({ input: child.stdout! }).on('line', (line) => {
    keep(line)
    onStdout?.(line)
  })
  const stderrLines = new Set<string>()
  createInterface({ input: child.stderr! }).on('line', (line) => {
    keep(line)
    if (!line.startsWith('bench-probe pid ') && stderrLines.size < STDERR_LINES) stderrLines.add(line)
  })
  let exitReason: string | undefined
  const exited = once(child, 'exit')
  child.once('exit', (code, signal) => {
    forgetPid(child.pid)
    exitReason = `${name} exited (code ${String(code)}, signal ${String(signal)})\n${output}`
  })
  child.once('error', (err) => { exitReason = `${name} could not be spawned: ${err.message}` })
  return { output: () => output, stderrLines: () => [...stderrLines], exitReason: () => exitReason, exited }
}

export interface UpstreamHandle {
  url: string
  pid: number | undefined
  close (): Promise<void>
}

/** The bundled demo upstream over Streamable HTTP, as a child process. */
export async function startDemoUpstream (): Promise<UpstreamHandle> {
  const nodeOptions = [process.env.NODE_OPTIONS ?? '', `--import ${PROBE}`].join(' ').trim()
  const upstream = await startUpstream('dist/demo/main.js', ['--http', '0'], { env: { NODE_OPTIONS: nodeOptions } })
  let pid: number | undefined
  for (let i = 0; i < 20 && pid === undefined; i++) {
    const match = /bench-probe pid (\d+)/.exec(upstream.stderr())
    if (match) pid = Number(match[1])
    else await new Promise((resolve) => setTimeout(resolve, 50))
  }
  registerPid(pid)
  const close = track(async () => {
    await upstream.close()
    forgetPid(pid)
  })
  return { url: upstream.url, pid, close }
}
