// Section "scale": how the gateway's costs grow with the work it holds, each figure at several sizes
// (BENCH_SCALE_* settings; BENCH_SCALE_FIGURES picks figures):
//   stored   — tasks a store holds (BENCH_SCALE_TASKS, per store): tasks/get, tasks/list (first and a middle
//              page), task creation, one sweep, the store's size (scale-stored.ts);
//   sessions — open 2025-11-25 sessions with a GET stream each (BENCH_SCALE_SESSIONS): memory per session and per
//              stream, a ping's latency meanwhile (scale-sessions.ts);
//   watched  — tasks being watched (BENCH_SCALE_WATCHED): gateway CPU per task per second, polled or listened to
//              (scale-watch.ts);
//   stdio    — per-client stdio upstream sessions (BENCH_SCALE_STDIO): memory and processes (scale-stdio.ts).
// Its data holds the raw rows and `curves` (scale-report.ts) for the benchmark page's charts. Checks: growth only
// (a cost per item at the largest size over the smallest's, same run); absolute numbers are reported.
import { closeSharedTaskGateways, measuredStores, skippedStoreNotes, type StoreKind } from '../lib/tasks.ts'
import type { Table } from '../lib/stats.ts'
import type { BenchContext, Check, Section, SectionResult } from '../lib/types.ts'
import { GROWTH_LIMIT, sessionsReport, stdioReport, storedReport, watchReport, type Curve } from './scale-report.ts'
import { measureOpenSessions } from './scale-sessions.ts'
import { measureStdioSessions } from './scale-stdio.ts'
import { measureStoredTasks } from './scale-stored.ts'
import { measureWatchedTasks } from './scale-watch.ts'

async function run (ctx: BenchContext): Promise<SectionResult> {
  const { settings } = ctx
  // The task sections' gateways (thousands of tasks in flight) would otherwise still be running.
  await closeSharedTaskGateways()
  const figures = settings.scaleFigures
  const tables: Table[] = []
  const curves: Curve[] = []
  const checks: Check[] = []
  const notes: string[] = []
  const data: Record<string, unknown> = {}
  const seconds: Record<string, number> = {}
  const timed = async <T>(figure: string, body: () => Promise<T>): Promise<T> => {
    const started = performance.now()
    try {
      return await body()
    } finally {
      seconds[figure] = Number(((performance.now() - started) / 1000).toFixed(1))
    }
  }
  const add = (report: { tables: Table[], curves: Curve[], checks: Check[] }): void => {
    tables.push(...report.tables)
    curves.push(...report.curves)
    checks.push(...report.checks)
  }
  // Latency windows: two fifths of BENCH_SECONDS each (2 s by default); CPU windows: BENCH_SECONDS.
  const latencyMs = settings.seconds * 400
  const cpuMs = settings.seconds * 1000

  if (figures.includes('stored')) {
    const stores = await measuredStores(ctx)
    const { byStore, failures } = await timed('stored', async () =>
      await measureStoredTasks(ctx, stores as StoreKind[], settings.scaleTasks, latencyMs / 2))
    for (const [store, message] of Object.entries(failures)) notes.push(`stored tasks, ${store} store: not measured: ${message}`)
    data.stored = byStore
    add(storedReport(byStore))
    notes.push(
      'stored tasks: the gateway runs in the bench process for this figure, so the bench fills its store through the store\'s own API ' +
        '(no 100,000 HTTP calls): clones of one real completed task of the measuring session, each with its own id and creation time, and a ' +
        `tenth as many more already past their ttl; tasks/get and tasks/list come from the load generator (own process), one at a time, ${latencyMs / 2000} s each; ` +
        'creation is up to 100 tools/call as a task through HTTP, one at a time (its task ends at once); the sweep is the store\'s sweep, timed around the call, ' +
        'removing the tasks past their ttl; sizes are live tasks',
      'store size: SQLite, the database file and its WAL; Redis, MEMORY USAGE of every key under the gateway\'s prefix; PostgreSQL, pg_total_relation_size of ' +
        'the gateway schema\'s tables; memory, the bench process\'s heap after full GC over the heap with the gateway started and empty',
      'the tasks past their ttl are the oldest, ahead of every live task in list order until the sweep removes them: a first page ' +
        'passes over them without reading them (memory: whole blocks at once; Redis: by their expiry score, once, as they leave the ' +
        'principal\'s list; SQLite and PostgreSQL: in the index, which holds the expiry); the middle page starts after them',
      ...skippedStoreNotes(ctx, stores),
    )
  }
  if (figures.includes('sessions')) {
    const rows = await timed('sessions', () => measureOpenSessions(ctx, settings.scaleSessions, latencyMs))
    data.sessions = rows
    add(sessionsReport(rows))
    notes.push('open sessions: one gateway (own process, memory store) grown through the sizes; memory after two full GCs, idle, then at each size with the sessions added ' +
      '(initialize and notifications/initialized), then with a GET stream on each new one; per session and per stream: what all of them added over the idle gateway, over the size; ping from the load generator on one more session, ' +
      `one at a time for ${latencyMs / 1000} s, with everything open`)
  }
  if (figures.includes('watched')) {
    const rows = await timed('watched', () => measureWatchedTasks(ctx, settings.scaleWatched, cpuMs))
    data.watched = rows
    add(watchReport(rows))
    notes.push(
      'watched tasks: one gateway (own process, memory store) with that many one-hour tasks for 2025-11-25 pollers and as many for 2026-07-28 ' +
        `listeners; each window ${cpuMs / 1000} s of the gateway's CPU. "fixed interval" polls each task every tasks.pollInterval (1 s); ` +
        '"suggested interval" polls each task again after the pollInterval its last answer gave; "listening" holds subscriptions/listen streams ' +
        '(100 task ids each) open; "idle" is nobody watching (listen streams of smaller sizes stay open)',
      '"µs/task/s at interval" is the gateway\'s CPU per poll times the polls a task gets a second at the interval (1 s, or the mean suggested ' +
        'one): the cost when clients keep to it; where "polls sent/s" is below tasks ÷ interval, the clients fell behind (a busy machine) and ' +
        'the measured µs/task/s understates polling',
      'no task changes status during the windows: a listener\'s cost per change (one notifications/tasks per change) is not in these numbers, a poller pays per poll whatever changes',
    )
  }
  if (figures.includes('stdio')) {
    const result = await timed('stdio', () => measureStdioSessions(ctx, settings.scaleStdio))
    data.stdio = result
    if (result === undefined) {
      notes.push('stdio sessions: not measured (the gateway runs in the bench process, BENCH_GATEWAY=inprocess)')
    } else {
      add(stdioReport(result))
      notes.push('stdio sessions: one gateway (own process) in front of the bench\'s echo server over stdio, sessions per-client; clients added up ' +
        'to each size (initialize and one echo each, so each one\'s process answers); RSS summed over the gateway and every process under it ' +
        '(shared pages count once per process, as ps shows them); private is RssAnon; per client is beyond the gateway with no client')
    }
  }
  notes.push(`figure times: ${Object.entries(seconds).map(([figure, s]) => `${figure} ${s} s`).join(', ')}`)
  notes.push('growth checks: a cost per item (a request\'s latency, bytes, CPU or memory per task, session or client) at the largest size over ' +
    'the same at the smallest; ' +
    `over ${GROWTH_LIMIT} × is worse than linear`)
  data.curves = curves
  data.seconds = seconds
  data.sizes = { tasks: settings.scaleTasks, sessions: settings.scaleSessions, watched: settings.scaleWatched, stdio: settings.scaleStdio }
  return { tables, checks, notes, data }
}

export const scaleSection: Section = {
  id: 'scale',
  title: 'Scale: costs as stored tasks, open sessions, watched tasks and stdio clients grow',
  run,
}
