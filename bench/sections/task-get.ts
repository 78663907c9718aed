// Section "task-get": `tasks/get` requests per second on one gateway process against its floor, a bare
// Fastify route (the gateway's Fastify, in a child process) answering a real `tasks/get` answer of the same
// gateway. The load generator (its own process, bench/lib/loadgen.ts) runs BENCH_CONCURRENCY workers (64)
// asking about existing task ids (round robin over the tasks in flight) for BENCH_SECONDS / BENCH_ROUNDS per
// window: in each round the floor, then each store (memory, sqlite, and redis when it answers), and the floor
// once more at the end, on the gateways task-create set up (started here when task-create did not run).
// Budgets (design.md §4): each store ≥ 70 % of the floor's requests/s; no event-loop stall over 50 ms.
import { cpus } from 'node:os'
import { startFastifyFloor, type FloorHandle } from '../lib/floors.ts'
import { generate, type GeneratedRun, type PreparedRequest } from '../lib/loadgen.ts'
import { concat, ms, summarize, type LatencySummary, type Table } from '../lib/stats.ts'
import {
  LOOP_STALL_LIMIT_MS, closeSharedTaskGateways, createTasks, measureWindow, measuredStores, perCallUs, profileNotes, profiled,
  sharedTaskGateway, us, type SharedTaskGateway, type StoreKind, type Window,
} from '../lib/tasks.ts'
import type { BenchContext, Check, Section, SectionResult } from '../lib/types.ts'

const RATIO_LIMIT = 0.7
const WARMUP_MS = 1000
const MIN_TASK_IDS = 100
/** Pre-built requests per target at least. */
const PREPARED = 4096
/** Every counted answer says the task is still in flight. */
const EXPECT = '"status":"working"'
/** A process busier than this share of one core during the window is taken as saturated. */
const SATURATED = 0.9

type Target = StoreKind | 'floor'

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
    : { cpuMs: after - before, maxLoopDelayMs: Number.NaN, p99LoopDelayMs: Number.NaN, rssBytes: 0, heapUsedBytes: 0 }
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

async function run (ctx: BenchContext): Promise<SectionResult> {
  const { settings } = ctx
  const workers = settings.concurrency
  let floor: FloorHandle | undefined
  try {
    const stores = await measuredStores(ctx)
    const gateways = await Promise.all(stores.map((store) => sharedTaskGateway(ctx, store)))
    // Ids to ask about even when BENCH_TASKS_IN_FLIGHT=0 and task-create did not run.
    for (const g of gateways) if (g.ids.length < MIN_TASK_IDS) g.ids.push(...await createTasks(g.session, MIN_TASK_IDS - g.ids.length, 16))
    // Round robin over the task ids, with distinct JSON-RPC ids: none is reused while an earlier use may be in flight.
    const requests = (g: SharedTaskGateway): PreparedRequest[] =>
      Array.from({ length: Math.max(PREPARED, g.ids.length) }, (_, i) => g.session.prepare('tasks/get', { taskId: g.ids[i % g.ids.length]! }))

    const prepared = new Map(gateways.map((g) => [g.store, requests(g)]))
    const first = gateways[0]!
    const template = await first.session.answerOf('tasks/get', { taskId: first.ids[0]! })
    ctx.log(`task-get: starting the floor, a bare Fastify route answering the ${first.store} gateway's tasks/get answer (${template.contentType})`)
    floor = await startFastifyFloor(template)
    const floorOrigin = new URL(floor.url).origin
    // The floor gets the very requests of the first gateway, sent to its own address.
    const floorRequests = prepared.get(first.store)!.map((r) => ({ ...r, origin: floorOrigin }))
    const load = (list: PreparedRequest[], durationMs: number) => (): Promise<GeneratedRun> =>
      generate({ requests: list, concurrency: workers, durationMs, expect: EXPECT })

    ctx.log(`task-get warm-up: ${workers} workers for ${WARMUP_MS / 1000} s on the floor and each store`)
    await load(floorRequests, WARMUP_MS)()
    for (const g of gateways) await load(prepared.get(g.store)!, WARMUP_MS)()

    const windows = new Map<Target, Window[]>([['floor', []], ...stores.map((store): [Target, Window[]] => [store, []])])
    const keep = (target: Target, window: Window): void => { windows.get(target)!.push(window) }
    const profiles: string[] = []
    const slice = settings.seconds * 1000 / settings.rounds
    const measureFloor = async (label: string): Promise<void> => {
      ctx.log(`task-get ${label}: ${workers} workers for ${(slice / 1000).toFixed(1)} s, Fastify floor`)
      keep('floor', await floorWindow(floor!, load(floorRequests, slice)))
    }
    for (let round = 0; round < settings.rounds; round++) {
      await measureFloor(`round ${round + 1}/${settings.rounds}`)
      for (const g of gateways) {
        ctx.log(`task-get round ${round + 1}/${settings.rounds}: ${workers} workers for ${(slice / 1000).toFixed(1)} s, ${g.store} store, ${g.ids.length} task ids`)
        await profiled(ctx, g.gateway, `task-get-${g.store}-${round + 1}`, profiles, async () => {
          keep(g.store, await measureWindow(ctx, g.gateway, load(prepared.get(g.store)!, slice)))
        })
      }
    }
    await measureFloor('closing floor window')

    const floorResult = result(windows.get('floor')!, undefined)
    const results = { floor: floorResult } as Record<Target, TargetResult>
    for (const store of stores) results[store] = result(windows.get(store)!, floorResult.requestsPerSecond)
    const targets: Target[] = ['floor', ...stores]
    const label = (t: Target): string => t === 'floor' ? 'floor: bare Fastify route' : `gateway, ${t} store`

    const throughputTable: Table = {
      title: `tasks/get, ${workers} workers, load generator in its own process (${settings.seconds} s per store, floor before each round and after the last)`,
      head: ['target', 'requests', 'requests/s', 'of floor', 'p50 ms', 'p99 ms', 'max ms'],
      rows: targets.map((t) => {
        const r = results[t]
        const l = r.latency
        return [label(t), String(r.requests), r.requestsPerSecond.toFixed(0), percent(r.ratioToFloor), ms(l.p50), ms(l.p99), ms(l.max)]
      }),
    }
    const costTable: Table = {
      title: 'CPU µs per tasks/get by process, share of a core used, and worst event-loop delay of the gateway',
      head: ['target', 'load generator µs', 'server µs', 'load generator busy', 'server busy', 'server-bound /s', 'gateway loop max ms'],
      rows: targets.map((t) => {
        const r = results[t]
        const bound = r.cpuUsPerRequest.server === undefined ? '—' : (1e6 / r.cpuUsPerRequest.server).toFixed(0)
        return [label(t), us(r.cpuUsPerRequest.client), us(r.cpuUsPerRequest.server), percent(r.busy.client), percent(r.busy.server), bound,
          t === 'floor' ? '—' : ms(r.serverMaxLoopDelayMs, 1)]
      }),
    }

    const floorRate = floorResult.requestsPerSecond
    const checks: Check[] = stores.map((store) => ({
      budget: `tasks/get throughput, ${store} store${workers === 64 ? '' : ` (${workers} workers)`}`,
      limit: `≥ ${RATIO_LIMIT * 100} % of the Fastify floor`,
      measured: `${percent(results[store].ratioToFloor)} (gateway ${results[store].requestsPerSecond.toFixed(0)}/s vs floor ${floorRate.toFixed(0)}/s)`,
      pass: results[store].ratioToFloor >= RATIO_LIMIT,
    }))
    const stall = Math.max(...stores.map((store) => results[store].serverMaxLoopDelayMs ?? Number.NaN))
    checks.push({
      budget: 'event-loop stall in the gateway, tasks/get',
      limit: `≤ ${LOOP_STALL_LIMIT_MS} ms`,
      measured: Number.isNaN(stall) ? 'n/a' : `${stall.toFixed(1)} ms`,
      pass: Number.isNaN(stall) ? undefined : stall <= LOOP_STALL_LIMIT_MS,
    })

    const floorRuns = windows.get('floor')!.map((w) => w.run.calls / (w.run.elapsedMs / 1000))
    const notes = [
      `floor: a bare Fastify route (the gateway's Fastify, own process) answering POST /mcp with the gateway's tasks/get answer (${JSON.stringify(template.answer).length} bytes of JSON, ` +
        `${template.contentType}), the request's id put in; it gets the very requests the ${first.store} gateway gets`,
      `floor windows: ${floorRuns.map((r) => r.toFixed(0)).join(', ')} requests/s (their spread is the drift of the machine during the section)`,
    ]
    for (const store of stores) {
      const r = results[store]
      const clientSaturated = r.busy.client >= SATURATED
      const gatewaySaturated = r.busy.server !== undefined && r.busy.server >= SATURATED
      notes.push(`${store}: ${clientSaturated && !gatewaySaturated
        ? 'the load generator is saturated, the gateway is not: the ratio understates the gateway'
        : gatewaySaturated
          ? 'the gateway process is saturated: the rate is its own limit on this machine'
          : `neither process is saturated (${cpus().length} cores shared by load generator, gateway and upstream)`}`)
    }
    if (floorResult.busy.client >= SATURATED) notes.push('the load generator is saturated on the floor: the floor is client-bound, so every ratio to it is too generous to the gateway')
    notes.push('"busy" is CPU time over wall time of the measured windows (100 % = one core); the load generator reports its own CPU')
    notes.push(...profileNotes(profiles))
    return {
      tables: [throughputTable, costTable],
      checks,
      notes,
      data: { workers, floorSetup: { kind: 'fastify', template, perWindowPerSecond: floorRuns }, ratioLimit: RATIO_LIMIT, ...results, profiles },
    }
  } finally {
    await floor?.close()
    // task-get is the last user of the shared gateways: close them so later sections run on a quiet machine.
    await closeSharedTaskGateways()
  }
}

export const taskGetSection: Section = {
  id: 'task-get',
  title: 'tasks/get throughput per gateway process against a bare Fastify route (memory, sqlite and redis store)',
  run,
}
