// The bench's load generator, a process of its own (plain JS: no tsx in its way), driven over IPC by
// bench/lib/loadgen.ts. For each `loadgen:run` it sends pre-built HTTP requests, cycling through them, from
// `concurrency` workers on keep-alive undici Pools (one per origin, kept between runs) until `durationMs` is
// over or `maxRequests` were sent, and answers with every latency, the errors and its own CPU time, so a run
// the client limits shows as such. A request counts only when it gets a 200 whose body contains `expect`.
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { Pool } from 'undici'

const TIMEOUT_MS = 30_000
const pools = new Map()

function poolFor (origin, connections) {
  const known = pools.get(origin)
  if (known !== undefined && known.connections >= connections) return known.pool
  known?.pool.close().catch(() => {})
  const pool = new Pool(origin, {
    connections, pipelining: 1, keepAliveTimeout: 60_000, headersTimeout: TIMEOUT_MS, bodyTimeout: TIMEOUT_MS,
  })
  pools.set(origin, { pool, connections })
  return pool
}

async function run ({ requests, concurrency, durationMs, maxRequests, expect }) {
  const prepared = requests.map((r) => ({
    pool: poolFor(r.origin, concurrency),
    options: { path: r.path, method: r.method, headers: r.headers, body: r.body },
  }))
  let latencies = new Float64Array(1 << 16)
  let count = 0
  let errors = 0
  let firstError
  let issued = 0
  const loopDelay = monitorEventLoopDelay({ resolution: 10 })
  loopDelay.enable()
  const cpu = process.cpuUsage()
  const started = performance.now()
  const deadline = started + durationMs
  const worker = async () => {
    while (performance.now() < deadline && issued < maxRequests) {
      const request = prepared[issued++ % prepared.length]
      const t0 = performance.now()
      try {
        const res = await request.pool.request(request.options)
        const text = await res.body.text()
        if (res.statusCode !== 200 || (expect !== undefined && !text.includes(expect))) throw new Error(`HTTP ${res.statusCode}: ${text.slice(0, 300)}`)
      } catch (err) {
        errors++
        firstError ??= String(err)
        continue
      }
      if (count === latencies.length) {
        const grown = new Float64Array(latencies.length * 2)
        grown.set(latencies)
        latencies = grown
      }
      latencies[count++] = performance.now() - t0
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  const elapsedMs = performance.now() - started
  const used = process.cpuUsage(cpu)
  loopDelay.disable()
  return {
    calls: count,
    errors,
    firstError,
    elapsedMs,
    latencies: latencies.slice(0, count),
    cpuMs: (used.user + used.system) / 1000,
    maxLoopDelayMs: loopDelay.max / 1e6,
  }
}

process.on('message', (message) => {
  if (message === null || typeof message !== 'object' || message.type !== 'loadgen:run') return
  run(message).then(
    (result) => process.send({ type: 'loadgen:result', seq: message.seq, result }),
    (err) => process.send({ type: 'loadgen:result', seq: message.seq, error: String(err?.stack ?? err) }),
  )
})
process.on('disconnect', () => {
  for (const { pool } of pools.values()) pool.destroy().catch(() => {})
  process.exit(0)
})
process.send({ type: 'loadgen:ready' })
