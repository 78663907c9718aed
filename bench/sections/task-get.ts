// Section "task-get": `tasks/get` requests per second on one gateway process against its floor, a bare
// Fastify route (the gateway's Fastify, in a child process) answering a real `tasks/get` answer of the same
// gateway. The load generator (its own process, bench/lib/loadgen.ts) runs BENCH_CONCURRENCY workers (64)
// asking about existing task ids (round robin over the tasks in flight) for BENCH_SECONDS / BENCH_ROUNDS per
// window: in each round the floor, then each store (memory, sqlite, and redis and postgres when they answer), and the floor
// once more at the end, on the gateways task-create set up (started here when task-create did not run).
// The same for a 2026-07-28 client (no session, the tasks extension declared) on the same gateways, against a
// second Fastify floor answering the gateway's 2026-07-28 tasks/get answer.
// Each store again with auth on (`auth on` rows: a gateway of its own with one static bearer token, its clients
// sending it with every request, as many tasks in flight), against the same floors: a floor is a bare route
// serving the same JSON and checks no token, so what authentication costs counts against the gateway.
// Budgets (design.md §4): each store ≥ 70 % of the floor's requests/s (memory, sqlite), ≥ 60 % (redis,
// postgres: one round trip); no event-loop stall over 50 ms.
import { cpus } from 'node:os'
import { startFastifyFloor, type AnswerTemplate, type FloorHandle } from '../lib/floors.ts'
import { generate, type GeneratedRun, type PreparedRequest } from '../lib/loadgen.ts'
import type { McpHttpSession, TaskClient } from '../lib/mcp-http.ts'
import { MODERN_VERSION } from '../lib/modern-http.ts'
import { concat, ms, summarize, type LatencySummary, type Table } from '../lib/stats.ts'
import { startAuthTaskGateway, type AuthTaskGateway } from '../lib/task-auth.ts'
import {
  LOOP_STALL_LIMIT_MS, closeSharedTaskGateways, createTasks, measureWindow, measuredStores, perCallUs, profileNotes, profiled,
  sharedTaskGateway, us, type SharedTaskGateway, type StoreKind, type Window,
} from '../lib/tasks.ts'
import type { BenchContext, Check, Section, SectionResult } from '../lib/types.ts'

/** design.md §4: the embedded stores; the shared ones (one round trip to their server per request) get less. */
const RATIO_LIMIT = 0.7
const SHARED_RATIO_LIMIT = 0.6
const ratioLimit = (store: StoreKind): number => store === 'redis' || store === 'postgres' ? SHARED_RATIO_LIMIT : RATIO_LIMIT
/** What the target names of the gateways with auth on have after the store. */
const AUTH_ON = ', auth on'
const WARMUP_MS = 1000
const MIN_TASK_IDS = 100
/** Pre-built requests per target at least. */
const PREPARED = 4096
/** Every counted answer says the task is still in flight. */
const EXPECT = '"status":"working"'
/** A process busier than this share of one core during the window is taken as saturated. */
const SATURATED = 0.9

/** `floor`, a store (with `, auth on` after it for the gateways with auth), or either with ` 2026-07-28` after it. */
type Target = string

/** One gateway the section measures: its store, whether auth is on, and its clients and tasks. */
interface Measured {
  name: string
  store: StoreKind
  g: SharedTaskGateway
}

interface TargetResult {
  requests: number
  elapsedMs: number
  requestsPerSecond: number
  latency: LatencySummary
  /** CPU µs per request of the load generator and of the server (gateway or floor process). */
  cpuUsPerRequest: { client: number | undefined, server: number | undefined }
  /** CPU time over wall time of the windows: 1 = one core fully busy. */
  busy: { client: number, server: number | undefined }
  /** requests/s of this target ÷ the floor's (1 for the floor). */
  ratioToFloor: number
  serverMaxLoopDelayMs: number | undefined
}

function percent (value: number | undefined): string {
  return value === undefined || Number.isNaN(value) ? '—' : `${(value * 100).toFixed(0)} %`
}

/** A window on the floor: the generator's run and the floor process's CPU. */
async function floorWindow (floor: FloorHandle, driver: () => Promise<GeneratedRun>): Promise<Window> {
  const before = floor.cpuMs()
  const run = await driver()
  const after = floor.cpuMs()
  // The floor has no probe: its CPU comes from /proc, its event loop is not watched.
  const stats = before === undefined || after === undefined
    ? undefined
    : {
        cpuMs: after - before,
        maxLoopDelayMs: Number.NaN,
        p99LoopDelayMs: Number.NaN,
        maxGcPauseMs: Number.NaN,
        rssBytes: 0,
        heapUsedBytes: 0,
      }
  return { run, gateway: stats, upstreamCpuMs: undefined }
}

function result (windows: readonly Window[], floorPerSecond: number | undefined): TargetResult {
  const calls = windows.reduce((n, w) => n + w.run.calls, 0)
  const elapsedMs = windows.reduce((n, w) => n + w.run.elapsedMs, 0)
  const clientCpuMs = windows.reduce((n, w) => n + w.run.clientCpuMs, 0)
  const serverCpuMs = windows.some((w) => w.gateway === undefined) ? undefined : windows.reduce((n, w) => n + w.gateway!.cpuMs, 0)
  const loop = windows.map((w) => w.gateway?.maxLoopDelayMs ?? Number.NaN)
  const perSecond = calls / (elapsedMs / 1000)
  return {
    requests: calls,
    elapsedMs,
    requestsPerSecond: perSecond,
    latency: summarize(concat(windows.map((w) => w.run.latencies))),
    cpuUsPerRequest: { client: perCallUs(clientCpuMs, calls), server: perCallUs(serverCpuMs, calls) },
    busy: { client: clientCpuMs / elapsedMs, server: serverCpuMs === undefined ? undefined : serverCpuMs / elapsedMs },
    ratioToFloor: floorPerSecond === undefined ? 1 : perSecond / floorPerSecond,
    serverMaxLoopDelayMs: loop.some(Number.isNaN) ? undefined : Math.max(...loop),
  }
}

/** A protocol: its label (a suffix of target names), its floor's target and how it reaches a gateway's tasks. */
interface Dialect {
  suffix: string
  floor: Target
  client: (g: SharedTaskGateway) => TaskClient & { prepare: McpHttpSession['prepare'], answerOf: McpHttpSession['answerOf'] }
  ids: (g: SharedTaskGateway) => string[]
}

const DIALECTS: readonly Dialect[] = [
  { suffix: '', floor: 'floor', client: (g) => g.session, ids: (g) => g.ids },
  { suffix: ` ${MODERN_VERSION}`, floor: `floor ${MODERN_VERSION}`, client: (g) => g.modern, ids: (g) => g.modernIds },
]

async function run (ctx: BenchContext): Promise<SectionResult> {
  const { settings } = ctx
  const workers = settings.concurrency
  const floors = new Map<Dialect, FloorHandle>()
  const authGateways: AuthTaskGateway[] = []
  try {
    const stores = await measuredStores(ctx)
    const shared = await Promise.all(stores.map((store) => sharedTaskGateway(ctx, store)))
    // Ids to ask about even when BENCH_TASKS_IN_FLIGHT=0 and task-create did not run.
    for (const g of shared) {
      for (const d of DIALECTS) {
        const ids = d.ids(g)
        if (ids.length < MIN_TASK_IDS) ids.push(...await createTasks(d.client(g), MIN_TASK_IDS - ids.length, 16))
      }
    }
    // As many tasks in flight on the gateways with auth on as on the others.
    for (const g of shared) {
      const tasks = Math.max(g.ids.length, g.modernIds.length)
      ctx.log(`task-get: starting a gateway with the ${g.store} store and auth on (one bearer token), ${tasks} tasks in flight per revision`)
      authGateways.push(await startAuthTaskGateway(ctx, g.store, tasks, Math.max(64, workers)))
    }
    const gateways: Measured[] = [
      ...shared.map((g) => ({ name: g.store, store: g.store, g })),
      ...authGateways.map((g) => ({ name: `${g.store}${AUTH_ON}`, store: g.store, g })),
    ]
    // Round robin over the task ids, with distinct JSON-RPC ids: none is reused while an earlier use may be in flight.
    const requests = (g: SharedTaskGateway, d: Dialect): PreparedRequest[] => {
      const ids = d.ids(g)
      return Array.from({ length: Math.max(PREPARED, ids.length) }, (_, i) => d.client(g).prepare('tasks/get', { taskId: ids[i % ids.length]! }))
    }
    const prepared = new Map<Target, PreparedRequest[]>()
    for (const d of DIALECTS) for (const m of gateways) prepared.set(`${m.name}${d.suffix}`, requests(m.g, d))
    const first = shared[0]!
    const templates = new Map<Dialect, AnswerTemplate>()
    for (const d of DIALECTS) {
      const template = await d.client(first).answerOf('tasks/get', { taskId: d.ids(first)[0]! })
      ctx.log(`task-get: starting the ${d.floor}, a bare Fastify route answering the ${first.store} gateway's tasks/get answer (${template.contentType})`)
      templates.set(d, template)
      const floor = await startFastifyFloor(template)
      floors.set(d, floor)
      // The floor gets the very requests of the first gateway, sent to its own address.
      const origin = new URL(floor.url).origin
      prepared.set(d.floor, prepared.get(`${first.store}${d.suffix}`)!.map((r) => ({ ...r, origin })))
    }
    const load = (target: Target, durationMs: number) => (): Promise<GeneratedRun> =>
      generate({ requests: prepared.get(target)!, concurrency: workers, durationMs, expect: EXPECT })

    const targets: Target[] = DIALECTS.flatMap((d) => [d.floor, ...gateways.map((m) => `${m.name}${d.suffix}`)])
    const storeOf = new Map<Target, StoreKind>(DIALECTS.flatMap((d) => gateways.map((m) => [`${m.name}${d.suffix}`, m.store] as const)))
    ctx.log(`task-get warm-up: ${workers} workers for ${WARMUP_MS / 1000} s on each floor and each store`)
    for (const t of targets) await load(t, WARMUP_MS)()

    const windows = new Map<Target, Window[]>(targets.map((t) => [t, []]))
    const keep = (target: Target, window: Window): void => { windows.get(target)!.push(window) }
    const profiles: string[] = []
    const slice = settings.seconds * 1000 / settings.rounds
    const measureFloor = async (d: Dialect, label: string): Promise<void> => {
      ctx.log(`task-get ${label}: ${workers} workers for ${(slice / 1000).toFixed(1)} s, Fastify ${d.floor}`)
      keep(d.floor, await floorWindow(floors.get(d)!, load(d.floor, slice)))
    }
    for (let round = 0; round < settings.rounds; round++) {
      for (const d of DIALECTS) {
        await measureFloor(d, `round ${round + 1}/${settings.rounds}`)
        for (const m of gateways) {
          const t = `${m.name}${d.suffix}`
          ctx.log(`task-get round ${round + 1}/${settings.rounds}: ${workers} workers for ${(slice / 1000).toFixed(1)} s, ${t}, ${d.ids(m.g).length} task ids`)
          await profiled(ctx, m.g.gateway, `task-get-${t.replace(/[^\w.]+/g, '-')}-${round + 1}`, profiles, async () => {
            keep(t, await measureWindow(ctx, m.g.gateway, load(t, slice)))
          })
        }
      }
    }
    for (const d of DIALECTS) await measureFloor(d, 'closing floor window')

    const results: Record<Target, TargetResult> = {}
    for (const d of DIALECTS) {
      const floorResult = result(windows.get(d.floor)!, undefined)
      results[d.floor] = floorResult
      for (const m of gateways) results[`${m.name}${d.suffix}`] = result(windows.get(`${m.name}${d.suffix}`)!, floorResult.requestsPerSecond)
    }
    const floorOf = (t: Target): Target => t.endsWith(MODERN_VERSION) ? DIALECTS[1]!.floor : DIALECTS[0]!.floor
    const label = (t: Target): string => t.startsWith('floor')
      ? `${t}: bare Fastify route`
      : `gateway, ${t.replace(/^(\w+)/, '$1 store').replace(` ${MODERN_VERSION}`, ` (${MODERN_VERSION})`)}`

    const throughputTable: Table = {
      title: `tasks/get, ${workers} workers, load generator in its own process (${settings.seconds} s per store and protocol, ` +
        `each protocol's floor before each round and after the last; ${MODERN_VERSION} rows against their own floor)`,
      head: ['target', 'requests', 'requests/s', 'of floor', 'p50 ms', 'p99 ms', 'max ms'],
      rows: targets.map((t) => {
        const r = results[t]!
        const l = r.latency
        return [label(t), String(r.requests), r.requestsPerSecond.toFixed(0), percent(r.ratioToFloor), ms(l.p50), ms(l.p99), ms(l.max)]
      }),
    }
    const costTable: Table = {
      title: 'CPU µs per tasks/get by process, share of a core used, and worst event-loop delay of the gateway',
      head: ['target', 'load generator µs', 'server µs', 'load generator busy', 'server busy', 'server-bound /s', 'gateway loop max ms'],
      rows: targets.map((t) => {
        const r = results[t]!
        const bound = r.cpuUsPerRequest.server === undefined ? '—' : (1e6 / r.cpuUsPerRequest.server).toFixed(0)
        return [label(t), us(r.cpuUsPerRequest.client), us(r.cpuUsPerRequest.server), percent(r.busy.client), percent(r.busy.server), bound,
          t.startsWith('floor') ? '—' : ms(r.serverMaxLoopDelayMs, 1)]
      }),
    }

    const gatewayTargets = targets.filter((t) => !t.startsWith('floor'))
    const checks: Check[] = gatewayTargets.map((t) => {
      const floorRate = results[floorOf(t)]!.requestsPerSecond
      const r = results[t]!
      const limit = ratioLimit(storeOf.get(t)!)
      return {
        budget: `tasks/get throughput, ${t.replace(/^(\w+)/, '$1 store').replace(` ${MODERN_VERSION}`, `, ${MODERN_VERSION}`)}${workers === 64 ? '' : ` (${workers} workers)`}`,
        limit: `≥ ${limit * 100} % of the Fastify floor`,
        measured: `${percent(r.ratioToFloor)} (gateway ${r.requestsPerSecond.toFixed(0)}/s vs floor ${floorRate.toFixed(0)}/s)`,
        pass: r.ratioToFloor >= limit,
      }
    })
    const stall = Math.max(...gatewayTargets.map((t) => results[t]!.serverMaxLoopDelayMs ?? Number.NaN))
    checks.push({
      budget: 'event-loop stall in the gateway, tasks/get',
      limit: `≤ ${LOOP_STALL_LIMIT_MS} ms`,
      measured: Number.isNaN(stall) ? 'n/a' : `${stall.toFixed(1)} ms`,
      pass: Number.isNaN(stall) ? undefined : stall <= LOOP_STALL_LIMIT_MS,
    })

    const floorRuns = (d: Dialect): number[] => windows.get(d.floor)!.map((w) => w.run.calls / (w.run.elapsedMs / 1000))
    const notes = DIALECTS.flatMap((d) => {
      const template = templates.get(d)!
      return [
        `${d.floor}: a bare Fastify route (the gateway's Fastify, own process) answering POST /mcp with the gateway's ${d.suffix === '' ? '2025-11-25' : MODERN_VERSION} ` +
          `tasks/get answer (${JSON.stringify(template.answer).length} bytes of JSON, ${template.contentType}), the request's id put in; ` +
          `it gets the very requests the ${first.store} gateway gets`,
        `${d.floor} windows: ${floorRuns(d).map((r) => r.toFixed(0)).join(', ')} requests/s (their spread is the drift of the machine during the section)`,
      ]
    })
    notes.push(`${MODERN_VERSION}: a client without session (no session lookup), its envelope and Mcp-Method/Mcp-Name headers on every request, ` +
      'the tasks extension declared, asking about the tasks it created itself')
    notes.push('auth on: a gateway of its own per store with one static bearer token in auth.tokens (no permissions), both clients ' +
      'sending it with every request (one principal); measured against the same floors, which check no token')
    for (const t of gatewayTargets) {
      const r = results[t]!
      const clientSaturated = r.busy.client >= SATURATED
      const gatewaySaturated = r.busy.server !== undefined && r.busy.server >= SATURATED
      notes.push(`${t}: ${clientSaturated && !gatewaySaturated
        ? 'the load generator is saturated, the gateway is not: the ratio understates the gateway'
        : gatewaySaturated
          ? 'the gateway process is saturated: the rate is its own limit on this machine'
          : `neither process is saturated (${cpus().length} cores shared by load generator, gateway and upstream)`}`)
    }
    for (const d of DIALECTS) {
      if (results[d.floor]!.busy.client >= SATURATED) notes.push(`the load generator is saturated on the ${d.floor}: the floor is client-bound, so every ratio to it is too generous to the gateway`)
    }
    notes.push('"busy" is CPU time over wall time of the measured windows (100 % = one core); the load generator reports its own CPU')
    notes.push(...profileNotes(profiles))
    const floorSetup = Object.fromEntries(DIALECTS.map((d) => [d.floor, { kind: 'fastify', template: templates.get(d), perWindowPerSecond: floorRuns(d) }]))
    return {
      tables: [throughputTable, costTable],
      checks,
      notes,
      data: { workers, floorSetup, ratioLimit: RATIO_LIMIT, sharedRatioLimit: SHARED_RATIO_LIMIT, ...results, profiles },
    }
  } finally {
    await Promise.all([...floors.values()].map((floor) => floor.close()))
    await Promise.all(authGateways.map((g) => g.close()))
    // task-get is the last user of the shared gateways: close them so later sections run on a quiet machine.
    await closeSharedTaskGateways()
  }
}

export const taskGetSection: Section = {
  id: 'task-get',
  title: 'tasks/get throughput per gateway process against a bare Fastify route (memory, sqlite, redis and postgres store; 2025-11-25 and 2026-07-28 clients; auth off and on)',
  run,
}
