// The bench side of the load generator (bench/lib/loadgen.mjs): one child process for the whole run, started on
// first use, that the sections point at the gateway and at its floors alike, one after the other, so each ratio
// compares runs of the same client. Its results have the shape of the in-process drivers' (load.ts), plus the
// generator's own CPU as a share of one core: near 100 % the client, not the server, set the rate.
import { fork, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import type { LoadRun } from './load.ts'
import { track, watchChild } from './processes.ts'

const SCRIPT = fileURLToPath(new URL('./loadgen.mjs', import.meta.url))
/** Slack on top of a run's duration before the bench gives up on the generator. */
const ANSWER_GRACE_MS = 60_000

/** One pre-built request; `origin` is `http://host:port`. */
export interface PreparedRequest {
  origin: string
  path: string
  method: 'POST' | 'GET'
  headers: Record<string, string>
  body?: string
}

export interface LoadSpec {
  /** Sent in turn, from the first again after the last. */
  requests: PreparedRequest[]
  concurrency: number
  durationMs: number
  /** Stop after this many requests even if time is left (default: no limit). */
  maxRequests?: number
  /** A substring every answer's body must contain to count (a fast wrong answer is an error). */
  expect?: string
}

export interface GeneratedRun extends LoadRun {
  /** The generator's CPU time over wall time: 1 = one core fully busy. */
  clientBusy: number
}

interface RawResult {
  calls: number
  errors: number
  firstError?: string
  elapsedMs: number
  latencies: Float64Array
  cpuMs: number
  maxLoopDelayMs: number
}

interface Reply { type?: string, seq?: number, result?: RawResult, error?: string }

let started: Promise<{ child: ChildProcess, exitReason: () => string | undefined }> | undefined
let seq = 0
const pending = new Map<number, (reply: Reply) => void>()

function generator (): Promise<{ child: ChildProcess, exitReason: () => string | undefined }> {
  started ??= (async () => {
    const child = fork(SCRIPT, [], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'], serialization: 'advanced', execArgv: [] })
    const watched = watchChild(child, 'load generator')
    track(async () => {
      started = undefined
      if (child.exitCode === null && child.signalCode === null) {
        child.disconnect()
        await watched.exited
      }
    })
    await new Promise<void>((resolve, reject) => {
      child.once('message', (message: Reply) => {
        if (message.type === 'loadgen:ready') resolve()
        else reject(new Error(`load generator: unexpected first message ${JSON.stringify(message)}`))
      })
      child.once('exit', () => reject(new Error(watched.exitReason() ?? 'load generator exited')))
    })
    child.on('message', (message: Reply) => {
      if (message.type !== 'loadgen:result' || message.seq === undefined) return
      pending.get(message.seq)?.(message)
      pending.delete(message.seq)
    })
    child.once('exit', () => {
      for (const answer of pending.values()) answer({ error: watched.exitReason() ?? 'load generator exited' })
      pending.clear()
    })
    return { child, exitReason: watched.exitReason }
  })()
  return started
}

/** Runs `spec` in the generator process; a request that fails (status, body, timeout) fails the run. */
export async function generate (spec: LoadSpec): Promise<GeneratedRun> {
  const { child } = await generator()
  const id = ++seq
  const reply = await new Promise<Reply>((resolve) => {
    const timer = setTimeout(() => {
      pending.delete(id)
      resolve({ error: `load generator did not answer within ${spec.durationMs + ANSWER_GRACE_MS} ms` })
    }, spec.durationMs + ANSWER_GRACE_MS)
    pending.set(id, (answer) => { clearTimeout(timer); resolve(answer) })
    child.send({ type: 'loadgen:run', seq: id, ...spec, maxRequests: spec.maxRequests ?? Number.MAX_SAFE_INTEGER })
  })
  if (reply.error !== undefined || reply.result === undefined) throw new Error(`load generator: ${reply.error ?? 'no result'}`)
  const r = reply.result
  if (r.errors > 0) throw new Error(`load generator: ${r.errors} of ${r.calls + r.errors} requests failed; first: ${r.firstError ?? '?'}`)
  return {
    calls: r.calls,
    elapsedMs: r.elapsedMs,
    latencies: r.latencies,
    clientMaxLoopDelayMs: r.maxLoopDelayMs,
    clientCpuMs: r.cpuMs,
    clientBusy: r.cpuMs / r.elapsedMs,
  }
}
