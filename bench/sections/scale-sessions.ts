// Section "scale", figure "open sessions": what open 2025-11-25 sessions, each with its GET stream, cost the
// gateway in memory, and what a cheap request (`ping` on another session, from the load generator) takes
// meanwhile, at BENCH_SCALE_SESSIONS sizes. One gateway (its own process, memory store) grown through the sizes:
// idle after a warm-up, then at each size with the sessions added (initialize and notifications/initialized each),
// then with a GET stream on each new one; memory read after two full GCs each time.
import { Pool } from 'undici'
import type { ProbeStats } from '../lib/gateway.ts'
import { generate } from '../lib/loadgen.ts'
import { McpHttpSession, PROTOCOL_VERSION } from '../lib/mcp-http.ts'
import { summarize, type LatencySummary } from '../lib/stats.ts'
import type { BenchContext } from '../lib/types.ts'

/** Initializes in flight while opening sessions. */
const OPENERS = 16
const CLIENT_INFO = { name: 'mcp-task-gateway-bench', version: '0.0.0' }

export interface SessionsSizeResult {
  sessions: number
  idle: { heapUsedBytes: number, rssBytes: number }
  withSessions: { heapUsedBytes: number, rssBytes: number }
  withStreams: { heapUsedBytes: number, rssBytes: number }
  perSession: { heapBytes: number, rssBytes: number }
  perStream: { heapBytes: number, rssBytes: number }
  /** `ping` on another session, one at a time, with every session and stream open. */
  ping: LatencySummary
  openMs: number
}

interface Memory { heapUsedBytes: number, rssBytes: number }

async function settled (read: (options: { gc: boolean }) => Promise<ProbeStats | undefined>): Promise<Memory> {
  await read({ gc: true })
  const stats = await read({ gc: true })
  if (stats === undefined) throw new Error('scale sessions: the gateway runs in the bench process (BENCH_GATEWAY=inprocess); its memory cannot be told apart')
  return { heapUsedBytes: stats.heapUsedBytes, rssBytes: stats.rssBytes }
}

/** initialize and notifications/initialized on `pool`; the new session's id. */
async function openSession (pool: Pool, path: string): Promise<string> {
  const res = await pool.request({
    path,
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: CLIENT_INFO } }),
  })
  const text = await res.body.text()
  const sessionId = res.headers['mcp-session-id']
  if (res.statusCode !== 200 || typeof sessionId !== 'string') throw new Error(`scale sessions: initialize got HTTP ${res.statusCode} ${text.slice(0, 200)}`)
  const ack = await pool.request({
    path,
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL_VERSION },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  })
  await ack.body.dump()
  if (ack.statusCode !== 202 && ack.statusCode !== 200) throw new Error(`scale sessions: notifications/initialized got HTTP ${ack.statusCode}`)
  return sessionId
}

/** Runs `task(i)` for i < count, `workers` at a time. */
async function inParallel (count: number, workers: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0
  await Promise.all(Array.from({ length: Math.min(workers, count) }, async () => {
    while (next < count) await task(next++)
  }))
}

/** Opens a GET stream on each session of `ids` through `streams` (one socket each), reading whatever comes. */
async function openStreams (streams: Pool, path: string, ids: readonly string[]): Promise<void> {
  await inParallel(ids.length, OPENERS, async (i) => {
    const res = await streams.request({
      path,
      method: 'GET',
      headers: { accept: 'text/event-stream', 'mcp-session-id': ids[i]!, 'mcp-protocol-version': PROTOCOL_VERSION },
    })
    if (res.statusCode !== 200) throw new Error(`scale sessions: GET stream got HTTP ${res.statusCode} ${(await res.body.text()).slice(0, 200)}`)
    // Read whatever comes (keep-alive comments), so no stream counts as stalled.
    res.body.on('data', () => {})
    res.body.on('error', () => {})
  })
}

/**
 * The figure: one gateway grown through the sizes in turn (sessions added up to each size, then a GET stream on
 * each new one), so that no size opens again what the one before opened. Per session and per stream are what
 * all the sessions and all the streams added over the idle gateway, over the size.
 */
export async function measureOpenSessions (ctx: BenchContext, sizes: readonly number[], windowMs: number): Promise<SessionsSizeResult[]> {
  const most = Math.max(...sizes)
  const room = most + 200
  const gateway = await ctx.startGateway({
    store: 'memory',
    server: { shutdownGrace: 0 },
    limits: { sessionsPerPrincipal: room, maxConnections: 2 * room, connectionsPerIp: 2 * room },
  })
  const url = new URL(gateway.url)
  const opener = new Pool(url.origin, { connections: OPENERS, pipelining: 1 })
  // One socket per GET stream: a stream holds its connection for as long as it is open.
  const streams = new Pool(url.origin, { connections: most, pipelining: 1, bodyTimeout: 0, headersTimeout: 30_000 })
  const probe = await McpHttpSession.open(gateway.url, 1)
  try {
    const pings = Array.from({ length: 64 }, () => probe.prepare('ping', {}))
    await generate({ requests: pings, concurrency: 1, durationMs: 1000, expect: '"result"' })
    const idle = await settled(gateway.readStats)
    const results: SessionsSizeResult[] = []
    const ids: string[] = []
    // What the sessions and the streams added so far, over the idle gateway.
    const added = { sessions: { heapUsedBytes: 0, rssBytes: 0 }, streams: { heapUsedBytes: 0, rssBytes: 0 } }
    let before = idle
    for (const count of sizes) {
      ctx.log(`scale sessions: opening sessions up to ${count}`)
      const started = performance.now()
      const fresh: string[] = new Array<string>(count - ids.length)
      await inParallel(fresh.length, OPENERS, async (i) => { fresh[i] = await openSession(opener, url.pathname) })
      const withSessions = await settled(gateway.readStats)
      ctx.log(`scale sessions: opening a GET stream on each of the ${fresh.length} new sessions`)
      await openStreams(streams, url.pathname, fresh)
      ids.push(...fresh)
      const openMs = performance.now() - started
      const withStreams = await settled(gateway.readStats)
      added.sessions.heapUsedBytes += withSessions.heapUsedBytes - before.heapUsedBytes
      added.sessions.rssBytes += withSessions.rssBytes - before.rssBytes
      added.streams.heapUsedBytes += withStreams.heapUsedBytes - withSessions.heapUsedBytes
      added.streams.rssBytes += withStreams.rssBytes - withSessions.rssBytes
      before = withStreams
      ctx.log(`scale sessions ${count}: ping latency meanwhile`)
      const ping = summarize((await generate({ requests: pings, concurrency: 1, durationMs: windowMs, expect: '"result"' })).latencies)
      results.push({
        sessions: count,
        idle,
        withSessions,
        withStreams,
        perSession: { heapBytes: added.sessions.heapUsedBytes / count, rssBytes: added.sessions.rssBytes / count },
        perStream: { heapBytes: added.streams.heapUsedBytes / count, rssBytes: added.streams.rssBytes / count },
        ping,
        openMs,
      })
    }
    return results
  } finally {
    await probe.close()
    await streams.destroy().catch(() => {})
    await opener.close().catch(() => {})
    await gateway.close()
  }
}
