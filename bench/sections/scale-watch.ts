// Section "scale", figure "watched tasks": the gateway's CPU per watched task per second at BENCH_SCALE_WATCHED
// tasks in flight, watched three ways: 2025-11-25 clients polling tasks/get every tasks.pollInterval (a fixed
// interval), the same clients polling at the interval each answer suggests (it grows with the task's age, up to
// tasks.pollIntervalMax), and 2026-07-28 clients listening for notifications/tasks (subscriptions/listen, a
// hundred task ids per stream). Beside them, the same window with nobody watching. One gateway (its own process,
// memory store); tasks run for an hour (demo `slow`), so no status changes during the windows: a listener
// costs what an idle stream costs, a poller what its tasks/get requests cost.
import { Pool } from 'undici'
import type { GatewayHandle } from '../lib/gateway.ts'
import { McpHttpSession, parseAnswer } from '../lib/mcp-http.ts'
import { ModernHttpClient } from '../lib/modern-http.ts'
import { BENCH_STATE_SECRET } from '../lib/redis.ts'
import { createTasks } from '../lib/tasks.ts'
import type { BenchContext } from '../lib/types.ts'

/** Task ids per subscriptions/listen stream. */
const IDS_PER_LISTEN = 100
/** The gateway's tasks.pollInterval (its default). */
const POLL_INTERVAL_MS = 1000
/** Polls in flight at most; a poll due while that many wait is late. */
const MAX_IN_FLIGHT = 256
const TICK_MS = 10
const CREATE_WORKERS = 32

export type WatchMode = 'idle' | 'polling, fixed interval' | 'polling, suggested interval' | 'listening'
export const WATCH_MODES: readonly WatchMode[] = ['idle', 'polling, fixed interval', 'polling, suggested interval', 'listening']

export interface WatchWindow {
  mode: WatchMode
  seconds: number
  gatewayCpuMs: number
  /** Gateway CPU µs per watched task per second of the window. */
  cpuUsPerTaskSecond: number
  /** Polls sent (each task when its interval is up) and polls answered. */
  pollsSent: number
  pollsAnswered: number
  /** Gateway CPU µs per poll answered (polling only). */
  cpuUsPerPoll: number | undefined
  /**
   * Polling: µs per poll × the polls one task gets a second at its interval (1 s fixed, or the mean suggested), what
   * the CPU per task per second is when the clients keep to the interval (on a busy machine they fall behind it);
   * otherwise the measured CPU per task per second.
   */
  cpuUsPerTaskSecondAtInterval: number
  /** Mean interval the gateway's answers suggested (polling only). */
  meanSuggestedMs: number | undefined
}

export interface WatchSizeResult {
  tasks: number
  windows: WatchWindow[]
}

function pollBody (id: number, taskId: string): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method: 'tasks/get', params: { taskId } })
}

/**
 * Polls every task of `ids` for `windowMs`: each at `fixedMs`, or at the interval its last answer suggested
 * (the first poll of each spread over one interval of the gateway's pollInterval).
 */
interface Polled { sent: number, answered: number, meanSuggestedMs: number }

async function poll (session: McpHttpSession, pool: Pool, ids: readonly string[], windowMs: number, fixedMs?: number): Promise<Polled> {
  const headers = session.prepare('ping', {}).headers
  const start = performance.now()
  const due = Float64Array.from(ids, (_, i) => start + (i / ids.length) * POLL_INTERVAL_MS)
  const busy = new Uint8Array(ids.length)
  // Changed by the answers, read by the loop below.
  const state = { inFlight: 0, sent: 0, answered: 0, suggestedSum: 0, failure: undefined as Error | undefined }
  const send = (i: number, sentAt: number): void => {
    busy[i] = 1
    state.inFlight++
    state.sent++
    pool.request({ path: session.url.pathname, method: 'POST', headers, body: pollBody(i, ids[i]!) })
      .then(async (res) => {
        const text = await res.body.text()
        if (res.statusCode !== 200) throw new Error(`tasks/get: HTTP ${res.statusCode} ${text.slice(0, 200)}`)
        const answer = parseAnswer(String(res.headers['content-type'] ?? ''), text, i)
        const suggested = Number(answer.result?.pollInterval)
        if (!Number.isFinite(suggested) || suggested <= 0) throw new Error(`tasks/get: no pollInterval in ${text.slice(0, 200)}`)
        state.answered++
        state.suggestedSum += suggested
        due[i] = sentAt + (fixedMs ?? suggested)
      })
      .catch((err: unknown) => { state.failure ??= err instanceof Error ? err : new Error(String(err)) })
      .finally(() => { busy[i] = 0; state.inFlight-- })
  }
  while (performance.now() - start < windowMs && state.failure === undefined) {
    const now = performance.now()
    for (let i = 0; i < ids.length && state.inFlight < MAX_IN_FLIGHT; i++) {
      if (busy[i] === 0 && due[i]! <= now) send(i, now)
    }
    await new Promise((resolve) => setTimeout(resolve, TICK_MS))
  }
  while (state.inFlight > 0) await new Promise((resolve) => setTimeout(resolve, TICK_MS))
  if (state.failure !== undefined) throw state.failure
  const { sent, answered, suggestedSum } = state
  return { sent, answered, meanSuggestedMs: answered === 0 ? Number.NaN : suggestedSum / answered }
}

/** Opens subscriptions/listen streams for `ids` and resolves once each has sent every task's current state. */
async function listen (client: ModernHttpClient, pool: Pool, ids: readonly string[]): Promise<void> {
  const opened: Array<Promise<void>> = []
  for (let from = 0; from < ids.length; from += IDS_PER_LISTEN) {
    const chunk = ids.slice(from, from + IDS_PER_LISTEN)
    const request = client.prepare('subscriptions/listen', { notifications: { taskIds: chunk } })
    opened.push((async () => {
      const res = await pool.request({ path: request.path, method: 'POST', headers: request.headers, body: request.body })
      if (res.statusCode !== 200) throw new Error(`subscriptions/listen: HTTP ${res.statusCode} ${(await res.body.text()).slice(0, 200)}`)
      await new Promise<void>((resolve, reject) => {
        let seen = 0
        res.body.on('data', (data: Buffer) => {
          seen += data.toString('utf8').split('"notifications/tasks"').length - 1
          if (seen >= chunk.length) resolve()
        })
        res.body.on('error', reject)
        res.body.on('end', () => reject(new Error('subscriptions/listen: the stream ended')))
      })
    })())
  }
  await Promise.all(opened)
}

/** The gateway's CPU while `body` runs, per watched task per second. */
async function window (gateway: GatewayHandle, mode: WatchMode, tasks: number,
  body: () => Promise<Polled | undefined>): Promise<WatchWindow> {
  await gateway.resetStats()
  const started = performance.now()
  const polled = await body()
  const seconds = (performance.now() - started) / 1000
  const stats = await gateway.readStats()
  if (stats === undefined) throw new Error('scale watched: the gateway runs in the bench process (BENCH_GATEWAY=inprocess); its CPU cannot be told apart')
  const perTaskSecond = stats.cpuMs * 1000 / tasks / seconds
  const perPoll = polled === undefined || polled.answered === 0 ? undefined : stats.cpuMs * 1000 / polled.answered
  const interval = mode === 'polling, fixed interval' ? POLL_INTERVAL_MS : polled?.meanSuggestedMs
  return {
    mode,
    seconds,
    cpuUsPerPoll: perPoll,
    cpuUsPerTaskSecondAtInterval: perPoll === undefined || interval === undefined ? perTaskSecond : perPoll * 1000 / interval,
    gatewayCpuMs: stats.cpuMs,
    cpuUsPerTaskSecond: perTaskSecond,
    pollsSent: polled?.sent ?? 0,
    pollsAnswered: polled?.answered ?? 0,
    meanSuggestedMs: polled?.meanSuggestedMs,
  }
}

export async function measureWatchedTasks (ctx: BenchContext, sizes: readonly number[], windowMs: number): Promise<WatchSizeResult[]> {
  const most = Math.max(...sizes)
  const listens = Math.ceil(most / IDS_PER_LISTEN)
  const gateway = await ctx.startGateway({
    store: 'memory',
    tasks: { maxActivePerPrincipal: 2 * most + 100, decide: 'always', pollInterval: `${POLL_INTERVAL_MS}ms` },
    upstream: { maxQueuedCalls: 2 * most + 100 },
    server: { shutdownGrace: 0, stateSecret: BENCH_STATE_SECRET },
    limits: { streamsPerSession: listens + 10, connectionsPerIp: listens + 1000, maxConnections: listens + 1000 },
  })
  const session = await McpHttpSession.open(gateway.url, CREATE_WORKERS)
  const modern = new ModernHttpClient(gateway.url, CREATE_WORKERS, { tasks: true })
  const origin = new URL(gateway.url).origin
  const polls = new Pool(origin, { connections: 64, pipelining: 1 })
  const streams = new Pool(origin, { connections: listens + 1, pipelining: 1, bodyTimeout: 0 })
  const legacyIds: string[] = []
  const modernIds: string[] = []
  try {
    const results: WatchSizeResult[] = []
    for (const size of sizes) {
      ctx.log(`scale watched: ${size} long-running tasks for 2025-11-25 pollers and as many for 2026-07-28 listeners`)
      legacyIds.push(...await createTasks(session, size - legacyIds.length, CREATE_WORKERS))
      const fresh = await createTasks(modern, size - modernIds.length, CREATE_WORKERS)
      modernIds.push(...fresh)
      const windows: WatchWindow[] = []
      windows.push(await window(gateway, 'idle', size, async () => {
        await new Promise((resolve) => setTimeout(resolve, windowMs))
        return undefined
      }))
      ctx.log(`scale watched ${size}: polling every ${POLL_INTERVAL_MS} ms, then at the suggested interval`)
      windows.push(await window(gateway, 'polling, fixed interval', size, () => poll(session, polls, legacyIds, windowMs, POLL_INTERVAL_MS)))
      windows.push(await window(gateway, 'polling, suggested interval', size, () => poll(session, polls, legacyIds, windowMs)))
      ctx.log(`scale watched ${size}: listening (${Math.ceil(size / IDS_PER_LISTEN)} subscriptions/listen streams)`)
      await listen(modern, streams, fresh)
      windows.push(await window(gateway, 'listening', size, async () => {
        await new Promise((resolve) => setTimeout(resolve, windowMs))
        return undefined
      }))
      results.push({ tasks: size, windows })
    }
    return results
  } finally {
    await streams.destroy().catch(() => {})
    await polls.close().catch(() => {})
    await session.close()
    await modern.close()
    await gateway.close()
  }
}
