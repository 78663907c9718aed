// Load drivers: sequential calls at concurrency 1, and a fixed-duration run of N concurrent workers.
// Both record each call's latency (ms) and the client process's event-loop delay and CPU time.
import { monitorEventLoopDelay } from 'node:perf_hooks'

export type Call = () => Promise<void>

export interface LoadRun {
  calls: number
  elapsedMs: number
  latencies: Float64Array
  /** Worst event-loop delay of this (client) process during the run, ms. */
  clientMaxLoopDelayMs: number
  /** CPU time (user + system) of this (client) process during the run, ms. */
  clientCpuMs: number
}

const loopDelay = monitorEventLoopDelay({ resolution: 10 })

function cpuMs (since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since)
  return (used.user + used.system) / 1000
}

async function measured (body: (record: (ms: number) => void) => Promise<void>, capacity: number): Promise<LoadRun> {
  let latencies = new Float64Array(capacity)
  let count = 0
  const record = (value: number): void => {
    if (count === latencies.length) {
      const grown = new Float64Array(latencies.length * 2)
      grown.set(latencies)
      latencies = grown
    }
    latencies[count++] = value
  }
  loopDelay.reset()
  loopDelay.enable()
  const cpu = process.cpuUsage()
  const started = performance.now()
  try {
    await body(record)
  } finally {
    loopDelay.disable()
  }
  const elapsedMs = performance.now() - started
  return {
    calls: count,
    elapsedMs,
    latencies: latencies.slice(0, count),
    clientMaxLoopDelayMs: loopDelay.max / 1e6,
    clientCpuMs: cpuMs(cpu),
  }
}

/** `count` calls one after another. */
export async function sequential (call: Call, count: number): Promise<LoadRun> {
  return await measured(async (record) => {
    for (let i = 0; i < count; i++) {
      const t0 = performance.now()
      await call()
      record(performance.now() - t0)
    }
  }, count)
}

/** `workers` loops calling back to back until `durationMs` is over; in-flight calls finish and count. */
export async function concurrent (call: Call, workers: number, durationMs: number): Promise<LoadRun> {
  return await measured(async (record) => {
    const deadline = performance.now() + durationMs
    const worker = async (): Promise<void> => {
      while (performance.now() < deadline) {
        const t0 = performance.now()
        await call()
        record(performance.now() - t0)
      }
    }
    await Promise.all(Array.from({ length: workers }, worker))
  }, 1 << 16)
}
