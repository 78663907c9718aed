// Section "task-memory": what a task in flight costs the gateway in memory. For each store, a fresh
// gateway gets one session and a warm-up of short tasks (which complete), is measured idle after full
// GCs, then gets BENCH_MEMORY_TASKS (10,000) one-hour tasks of demo `slow` and is measured again. The
// tasks beyond maxConcurrentCalls wait in the upstream pool's queue, so only a few upstream calls run
// while all of them are in flight for the client. Heap used and RSS are reported apart: heap is the
// JS objects the gateway keeps per task; RSS adds native memory (sqlite page cache, sockets) and
// memory V8 has not given back to the OS.
// The redis and postgres stores (when their servers answer) are measured too: their memory is reported, their
// stall checked.
// Budgets (design.md §4): ≤ 10 KB per task in flight beyond the idle process (memory and sqlite store); no
// event-loop stall over 50 ms while the tasks are created, on every store.
import { McpHttpSession } from '../lib/mcp-http.ts'
import type { ProbeStats } from '../lib/gateway.ts'
import { ms, type Table } from '../lib/stats.ts'
import type { LoadRun } from '../lib/load.ts'
import {
  LOOP_STALL_LIMIT_MS, QUICK_TASK, STORES, SLOW_TOOL, awaitTerminal, closeSharedTaskGateways, createTasks, measureWindow, mib,
  measuredStores, profileNotes, profiled, skippedStoreNotes, startTaskGateway, us, type StoreKind, type Window,
} from '../lib/tasks.ts'
import type { BenchContext, Check, Section, SectionResult } from '../lib/types.ts'

const PER_TASK_LIMIT_BYTES = 10 * 1024
const WARMUP_TASKS = 200
const CREATE_WORKERS = 32
const CONNECTIONS = 32

interface StoreResult {
  tasks: number
  idle: ProbeStats
  loaded: ProbeStats
  perTaskBytes: { heap: number, rss: number }
  createMs: number
  createsPerSecond: number
  gatewayCpuUsPerCreate: number | undefined
  gatewayMaxLoopDelayMs: number | undefined
  gatewayMaxGcPauseMs: number | undefined
}

/** Full GC, twice (the second reading is the settled one), and the gateway's memory after it. */
async function settledStats (read: (options: { gc: boolean }) => Promise<ProbeStats | undefined>): Promise<ProbeStats | undefined> {
  await read({ gc: true })
  await new Promise((resolve) => setTimeout(resolve, 100))
  return await read({ gc: true })
}

function kb (bytes: number): string {
  return (bytes / 1024).toFixed(2)
}

async function measureStore (ctx: BenchContext, store: StoreKind, profiles: string[]): Promise<StoreResult | undefined> {
  const count = ctx.settings.memoryTasks
  ctx.log(`task-memory: starting a gateway with the ${store} store (room for ${count} tasks in flight)`)
  const gateway = await startTaskGateway(ctx, store, { maxTasks: count + WARMUP_TASKS + 100 })
  let session: McpHttpSession | undefined
  try {
    if (gateway.mode !== 'child') return undefined
    session = await McpHttpSession.open(gateway.url, CONNECTIONS)
    ctx.log(`task-memory ${store}: warm-up, ${WARMUP_TASKS} tasks that end at once`)
    await awaitTerminal(session, await createTasks(session, WARMUP_TASKS, CREATE_WORKERS, QUICK_TASK))
    const idle = await settledStats(gateway.readStats)

    ctx.log(`task-memory ${store}: putting ${count} long-running ${SLOW_TOOL} tasks in flight`)
    let ids: string[] = []
    let window: Window | undefined
    await profiled(ctx, gateway, `task-memory-${store}`, profiles, async () => {
      window = await measureWindow(ctx, gateway, async (): Promise<LoadRun> => {
        const started = performance.now()
        const cpu = process.cpuUsage()
        ids = await createTasks(session!, count, CREATE_WORKERS)
        const used = process.cpuUsage(cpu)
        return {
          calls: ids.length,
          elapsedMs: performance.now() - started,
          latencies: new Float64Array(0),
          clientMaxLoopDelayMs: Number.NaN,
          clientCpuMs: (used.user + used.system) / 1000,
        }
      })
    })
    // In flight: the first and the last task are still working (the first holds an upstream connection, the last is queued).
    for (const id of [ids[0]!, ids.at(-1)!]) {
      const status = await session.getTask(id)
      if (status !== 'working') throw new Error(`${store}: task ${id} is ${status}, expected working (in flight)`)
    }
    const loaded = await settledStats(gateway.readStats)
    if (!idle || !loaded || !window) return undefined
    return {
      tasks: ids.length,
      idle,
      loaded,
      perTaskBytes: { heap: (loaded.heapUsedBytes - idle.heapUsedBytes) / ids.length, rss: (loaded.rssBytes - idle.rssBytes) / ids.length },
      createMs: window.run.elapsedMs,
      createsPerSecond: ids.length / (window.run.elapsedMs / 1000),
      gatewayCpuUsPerCreate: window.gateway === undefined ? undefined : window.gateway.cpuMs * 1000 / ids.length,
      gatewayMaxLoopDelayMs: window.gateway?.maxLoopDelayMs,
      gatewayMaxGcPauseMs: window.gateway?.maxGcPauseMs,
    }
  } finally {
    await session?.close()
    ctx.log(`task-memory ${store}: closing the gateway (its ${count} tasks are cancelled by the shutdown)`)
    await gateway.close()
  }
}

async function run (ctx: BenchContext): Promise<SectionResult> {
  const { settings } = ctx
  // The gateways of task-create and task-get (thousands of tasks) would otherwise still be running.
  await closeSharedTaskGateways()
  const profiles: string[] = []
  const results = {} as Record<StoreKind, StoreResult | undefined>
  const stores = await measuredStores(ctx)
  for (const store of stores) results[store] = await measureStore(ctx, store, profiles)

  const rows = stores.map((store) => {
    const r = results[store]
    if (!r) return [store, 'n/a', '', '', '', '', '', '', '']
    return [store, String(r.tasks), mib(r.idle.heapUsedBytes), mib(r.loaded.heapUsedBytes), kb(r.perTaskBytes.heap),
      mib(r.idle.rssBytes), mib(r.loaded.rssBytes), kb(r.perTaskBytes.rss), r.createsPerSecond.toFixed(0)]
  })
  const memoryTable: Table = {
    title: `gateway memory after full GC, idle vs ${settings.memoryTasks} tasks in flight (MiB; per task in KiB)`,
    head: ['store', 'tasks', 'heap idle', 'heap loaded', 'heap/task KiB', 'RSS idle', 'RSS loaded', 'RSS/task KiB', 'creates/s'],
    rows,
  }
  const costTable: Table = {
    title: `putting the tasks in flight (${CREATE_WORKERS} concurrent creations)`,
    head: ['store', 'gateway µs per create', 'gateway loop max ms', 'longest GC pause ms'],
    rows: stores.map((store) => [store, us(results[store]?.gatewayCpuUsPerCreate), ms(results[store]?.gatewayMaxLoopDelayMs, 1),
      ms(results[store]?.gatewayMaxGcPauseMs, 1)]),
  }

  const checks: Check[] = []
  for (const store of STORES) {
    const r = results[store]
    const worst = r === undefined ? undefined : Math.max(r.perTaskBytes.heap, r.perTaskBytes.rss)
    checks.push({
      budget: `memory per task in flight, ${store} store (worse of heap, RSS)`,
      limit: `≤ ${PER_TASK_LIMIT_BYTES / 1024} KiB each`,
      measured: r === undefined ? 'n/a' : `heap ${kb(r.perTaskBytes.heap)} / RSS ${kb(r.perTaskBytes.rss)} KiB`,
      pass: worst === undefined ? undefined : worst <= PER_TASK_LIMIT_BYTES,
    })
  }
  for (const store of stores) {
    const stall = results[store]?.gatewayMaxLoopDelayMs
    checks.push({
      budget: `event-loop stall in the gateway, creating ${settings.memoryTasks} tasks${settings.memoryTasks < 10_000 ? ' (budget is stated for 10,000)' : ''}, ${store} store`,
      limit: `≤ ${LOOP_STALL_LIMIT_MS} ms`,
      measured: stall === undefined ? 'n/a' : `${stall.toFixed(1)} ms`,
      pass: stall === undefined ? undefined : stall <= LOOP_STALL_LIMIT_MS,
    })
  }

  const notes = [
    settings.gatewayMode === 'child'
      ? 'one fresh gateway per store; "idle" is after its session was opened and warm-up tasks completed (those stay in the store: part of idle); readings are taken after two full GCs (--expose-gc)'
      : 'the gateway runs in the bench process (BENCH_GATEWAY=inprocess): its memory cannot be told apart, nothing is measured',
    `all tasks belong to one session (one principal); maxConcurrentCalls ${settings.maxConcurrentCalls ?? 16} of them hold an upstream connection, the rest wait in the upstream pool's queue`,
    'heap/task is the JS heap the gateway keeps per task (records, runner state, queue entries); RSS/task adds native memory and is noisy (V8 and malloc keep freed pages)',
    ...skippedStoreNotes(ctx, stores),
    ...stores.filter((s) => (s === 'redis' || s === 'postgres') && results[s] !== undefined)
      .map((s) => `${s} store: memory reported without a budget (design.md §4 states it for memory and sqlite); stall checked`),
    ...profileNotes(profiles),
  ]
  return { tables: [memoryTable, costTable], checks, notes, data: { ...results, profiles } }
}

export const taskMemorySection: Section = {
  id: 'task-memory',
  title: 'Memory per task in flight (memory, sqlite, redis and postgres store)',
  run,
}
