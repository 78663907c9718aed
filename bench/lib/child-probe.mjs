// Preloaded into the bench's child processes (plain JS so it loads before or without tsx).
// - Exits the child (SIGTERM to itself, so it shuts down gracefully) when the bench process dies,
//   even by SIGKILL: no orphaned gateway or upstream is left behind.
// - Prints `bench-probe pid <pid>` on stderr so the bench can read the child's CPU time from /proc.
// - With an IPC channel (the gateway child), answers `bench-probe:reset` / `bench-probe:read` with the
//   child's own event-loop delay, longest garbage-collection pause, CPU time and memory, so the bench reports gateway-side numbers,
//   and `bench-probe:profile-start` / `bench-probe:profile-stop` (with `file`) with a V8 CPU profile of
//   exactly the measured window (written as a .cpuprofile file).
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector'
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks'

const parent = process.ppid
const guard = setInterval(() => {
  if (process.ppid !== parent) process.kill(process.pid, 'SIGTERM')
}, 500)
guard.unref()
process.stderr.write(`bench-probe pid ${process.pid}\n`)

if (typeof process.send === 'function') {
  const loopDelay = monitorEventLoopDelay({ resolution: 10 })
  loopDelay.enable()
  // The longest pause of the garbage collector: a loop stall of about that length is the collector's.
  let maxGcPauseMs = 0
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) maxGcPauseMs = Math.max(maxGcPauseMs, entry.duration)
  }).observe({ entryTypes: ['gc'] })
  let cpu = process.cpuUsage()
  let inspector
  const post = (method, params) => new Promise((resolve, reject) => {
    inspector.post(method, params, (err, result) => err ? reject(err) : resolve(result))
  })
  const reply = (seq, extra) => process.send({ type: 'bench-probe:reply', seq, ...extra })
  process.on('message', (message) => {
    if (message === null || typeof message !== 'object') return
    if (message.type === 'bench-probe:profile-start') {
      inspector ??= new Session()
      inspector.connect()
      post('Profiler.enable')
        .then(() => post('Profiler.setSamplingInterval', { interval: 100 }))
        .then(() => post('Profiler.start'))
        .then(() => reply(message.seq), (err) => reply(message.seq, { error: String(err) }))
      return
    }
    if (message.type === 'bench-probe:profile-stop') {
      post('Profiler.stop')
        .then(({ profile }) => {
          writeFileSync(message.file, JSON.stringify(profile))
          inspector.disconnect()
          reply(message.seq)
        })
        .catch((err) => reply(message.seq, { error: String(err) }))
      return
    }
    if (message.type === 'bench-probe:reset') {
      loopDelay.reset()
      maxGcPauseMs = 0
      cpu = process.cpuUsage()
      reply(message.seq)
    } else if (message.type === 'bench-probe:read') {
      if (message.gc === true && typeof globalThis.gc === 'function') globalThis.gc()
      const used = process.cpuUsage(cpu)
      const memory = process.memoryUsage()
      reply(message.seq, {
        stats: {
          maxLoopDelayMs: loopDelay.max / 1e6,
          p99LoopDelayMs: loopDelay.percentile(99) / 1e6,
          maxGcPauseMs,
          cpuMs: (used.user + used.system) / 1000,
          rssBytes: memory.rss,
          heapUsedBytes: memory.heapUsed,
        },
      })
    }
  })
  process.channel?.unref()
  process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'))
}
