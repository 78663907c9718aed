// Section "task-get": `tasks/get` requests per second on one gateway process, BENCH_CONCURRENCY
// workers (64) asking about existing task ids (round robin over the tasks in flight) for BENCH_SECONDS
// per store (memory, sqlite, and redis when it answers), on the gateways task-create set up (started here
// when task-create did not run). As with sync-call, it reports each process's CPU per request, so a run
// where the bench's own HTTP client (or the 2 cores it shares with the gateway and the upstream) is the
// limit is visible as such.
// Budgets (design.md §4): ≥ 15,000 tasks/get per second per process; no event-loop stall over 50 ms
// (memory and sqlite store). The redis numbers are reported without a budget.
import { cpus } from 'node:os'
import { concurrent } from '../lib/load.ts'
import { concat, ms, summarize, type LatencySummary, type Table } from '../lib/stats.ts'
import {
  LOOP_STALL_LIMIT_MS, STORES, closeSharedTaskGateways, createTasks, measureWindow, measuredStores, perCallUs, profileNotes, profiled,
  redisSkippedNote, sharedTaskGateway, totalsOf, us, type SharedTaskGateway, type StoreKind, type Window,
} from '../lib/tasks.ts'
import type { BenchContext, Check, Section, SectionResult } from '../lib/types.ts'

const RATE_LIMIT = 15_000
const WARMUP_MS = 1000
const MIN_TASK_IDS = 100
/** A process busier than this share of one core during the window is taken as saturated. */
const SATURATED = 0.9

interface StoreResult {
  requests: number
  elapsedMs: number
  requestsPerSecond: number
  latency: LatencySummary
  taskIds: number
  cpuUsPerRequest: { client: number | undefined, gateway: number | undefined, upstream: number | undefined }
  /** CPU time over wall time of the window: 1 = one core fully busy. */
  busy: { client: number, gateway: number | undefined }
  /** The rate each process alone could sustain on one core at its measured CPU per request. */
  ceilingPerSecond: { client: number | undefined, gateway: number | undefined }
  clientMaxLoopDelayMs: number
  gatewayMaxLoopDelayMs: number | undefined
}

function rate (value: number | undefined): string {
  return value === undefined || !Number.isFinite(value) ? '—' : value.toFixed(0)
}

function percent (value: number | undefined): string {
  return value === undefined ? '—' : `${(value * 100).toFixed(0)} %`
}

async function run (ctx: BenchContext): Promise<SectionResult> {
  const { settings } = ctx
  const workers = settings.concurrency
  try {
    const stores = await measuredStores(ctx)
    const gateways = await Promise.all(stores.map((store) => sharedTaskGateway(ctx, store)))
    // Ids to ask about even when BENCH_TASKS_IN_FLIGHT=0 and task-create did not run.
    for (const g of gateways) if (g.ids.length < MIN_TASK_IDS) g.ids.push(...await createTasks(g.session, MIN_TASK_IDS - g.ids.length, 16))
    /** One tasks/get on the next id of `g`, round robin; a task that is not in flight any more fails the run. */
    const get = (g: SharedTaskGateway) => {
      let next = 0
      return async (): Promise<void> => {
        const id = g.ids[next++ % g.ids.length]!
        const status = await g.session.getTask(id)
        if (status !== 'working') throw new Error(`tasks/get ${id}: ${status}, expected working`)
      }
    }
    const windows = new Map<StoreKind, Window[]>(stores.map((store) => [store, []]))
    const profiles: string[] = []
    const slice = settings.seconds * 1000 / settings.rounds
    for (const g of gateways) {
      ctx.log(`task-get warm-up: ${workers} workers for ${WARMUP_MS / 1000} s, ${g.store} store`)
      await concurrent(get(g), workers, WARMUP_MS)
    }
    for (let round = 0; round < settings.rounds; round++) {
      for (const g of gateways) {
        ctx.log(`task-get round ${round + 1}/${settings.rounds}: ${workers} workers for ${(slice / 1000).toFixed(1)} s, ${g.store} store, ${g.ids.length} task ids`)
        await profiled(ctx, g.gateway, `task-get-${g.store}-${round + 1}`, profiles, async () => {
          windows.get(g.store)!.push(await measureWindow(ctx, g.gateway, () => concurrent(get(g), workers, slice)))
        })
      }
    }

    const results: Partial<Record<StoreKind, StoreResult>> = {}
    const measured = (store: StoreKind): StoreResult => results[store]!
    for (const g of gateways) {
      const t = totalsOf(windows.get(g.store)!)
      const client = perCallUs(t.clientCpuMs, t.calls)
      const gateway = perCallUs(t.gatewayCpuMs, t.calls)
      results[g.store] = {
        requests: t.calls,
        elapsedMs: t.elapsedMs,
        requestsPerSecond: t.calls / (t.elapsedMs / 1000),
        latency: summarize(concat(t.latencies)),
        taskIds: g.ids.length,
        cpuUsPerRequest: { client, gateway, upstream: perCallUs(t.upstreamCpuMs, t.calls) },
        busy: { client: t.clientCpuMs / t.elapsedMs, gateway: t.gatewayCpuMs === undefined ? undefined : t.gatewayCpuMs / t.elapsedMs },
        ceilingPerSecond: {
          client: client === undefined ? undefined : 1e6 / client,
          gateway: gateway === undefined ? undefined : 1e6 / gateway,
        },
        clientMaxLoopDelayMs: t.clientMaxLoopDelayMs,
        gatewayMaxLoopDelayMs: t.gatewayMaxLoopDelayMs,
      }
    }

    const throughputTable: Table = {
      title: `tasks/get, ${workers} workers (${settings.seconds} s per store, one session, ids round robin)`,
      head: ['store', 'task ids', 'requests', 'requests/s', 'p50 ms', 'p99 ms', 'max ms'],
      rows: stores.map((store) => {
        const r = measured(store)
        return [
          store,
          String(r.taskIds),
          String(r.requests),
          r.requestsPerSecond.toFixed(0),
          ms(r.latency.p50),
          ms(r.latency.p99),
          ms(r.latency.max),
        ]
      }),
    }
    const costTable: Table = {
      title: 'CPU µs per tasks/get by process, share of a core used, and the rate each process could reach alone on one core',
      head: ['store', 'client µs', 'gateway µs', 'upstream µs', 'client busy', 'gateway busy', 'client-bound /s', 'gateway-bound /s', 'gateway loop max ms'],
      rows: stores.map((store) => {
        const r = measured(store)
        return [
          store,
          us(r.cpuUsPerRequest.client),
          us(r.cpuUsPerRequest.gateway),
          us(r.cpuUsPerRequest.upstream),
          percent(r.busy.client),
          percent(r.busy.gateway),
          rate(r.ceilingPerSecond.client),
          rate(r.ceilingPerSecond.gateway),
          ms(r.gatewayMaxLoopDelayMs, 1),
        ]
      }),
    }

    // The budgets are stated for the sqlite and memory stores: redis is reported, not checked.
    const stall = Math.max(...STORES.map((store) => measured(store).gatewayMaxLoopDelayMs ?? Number.NaN))
    const checks: Check[] = STORES.map((store) => ({
      budget: `tasks/get throughput, ${store} store${workers === 64 ? '' : ` (${workers} workers)`}`,
      limit: `≥ ${RATE_LIMIT.toLocaleString('en-US')}/s`,
      measured: `${measured(store).requestsPerSecond.toFixed(0)}/s`,
      pass: measured(store).requestsPerSecond >= RATE_LIMIT,
    }))
    checks.push({
      budget: 'event-loop stall in the gateway, tasks/get',
      limit: `≤ ${LOOP_STALL_LIMIT_MS} ms`,
      measured: Number.isNaN(stall) ? 'n/a' : `${stall.toFixed(1)} ms`,
      pass: Number.isNaN(stall) ? undefined : stall <= LOOP_STALL_LIMIT_MS,
    })

    const notes: string[] = []
    for (const store of stores) {
      const r = measured(store)
      const clientSaturated = r.busy.client >= SATURATED
      const gatewaySaturated = r.busy.gateway !== undefined && r.busy.gateway >= SATURATED
      const limiter = clientSaturated && !gatewaySaturated
        ? 'the bench\'s HTTP client is the bottleneck (its process is saturated, the gateway is not): the measured rate understates the gateway'
        : gatewaySaturated
          ? 'the gateway process is saturated: the measured rate is the gateway\'s own limit on this machine'
          : `neither process is saturated (${cpus().length} cores shared by client, gateway and upstream: CPU contention or latency limits the rate)`
      notes.push(`${store}: ${limiter}; gateway-bound estimate at ${us(r.cpuUsPerRequest.gateway)} µs/request: ${rate(r.ceilingPerSecond.gateway)}/s on one free core`)
    }
    const redis = results.redis
    notes.push(redis === undefined
      ? redisSkippedNote(ctx)
      : `redis store (one process; reported, no budget: design.md §4 states them for sqlite and memory): ${redis.requestsPerSecond.toFixed(0)} tasks/get per second, p99 ${ms(redis.latency.p99)} ms; three processes on one Redis: section task-cluster`)
    notes.push('"busy" is CPU time over wall time of the measured windows (100 % = one core); "client µs" is the bench process\'s own CPU per request, counted like sync-call\'s')
    notes.push(...profileNotes(profiles))
    return {
      tables: [throughputTable, costTable],
      checks,
      notes,
      data: { workers, ...results, profiles },
    }
  } finally {
    // task-get is the last user of the shared gateways: close them so later sections run on a quiet machine.
    await closeSharedTaskGateways()
  }
}

export const taskGetSection: Section = {
  id: 'task-get',
  title: 'tasks/get throughput per gateway process (memory, sqlite and redis store)',
  run,
}
