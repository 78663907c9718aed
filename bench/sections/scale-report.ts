// Section "scale": its results as tables, as curves (the shape bench/page.ts draws charts from) and as growth
// checks: a cost per item at the largest size over the same cost at the smallest, in the same run. Costs that are
// flat per item (a request's latency, bytes or CPU per task, memory per session) stay near 1 when growth is
// linear; over 2 is worse than linear, a defect.
import { ms, type Table } from '../lib/stats.ts'
import type { Check } from '../lib/types.ts'
import type { StoredSizeResult } from './scale-stored.ts'
import type { SessionsSizeResult } from './scale-sessions.ts'
import { WATCH_MODES, type WatchSizeResult } from './scale-watch.ts'
import type { StdioScaleResult } from './scale-stdio.ts'

/** A curve of the benchmark page: one chart, one line per series, values at the x values (null: not measured). */
export interface Curve {
  id: string
  title: string
  x: { label: string, values: number[] }
  y: { label: string, unit: string }
  series: Array<{ name: string, values: Array<number | null> }>
  log?: boolean
}

export const GROWTH_LIMIT = 2

const kib = (bytes: number | undefined): string => bytes === undefined || Number.isNaN(bytes) ? 'n/a' : (bytes / 1024).toFixed(2)
const mibValue = (bytes: number | undefined): number | null =>
  bytes === undefined || Number.isNaN(bytes) ? null : Number((bytes / 1048576).toFixed(3))
const round = (value: number | undefined, digits = 3): number | null =>
  value === undefined || Number.isNaN(value) ? null : Number(value.toFixed(digits))

/** The cost at the largest size over the cost at the smallest (undefined when there is one size, or no cost). */
function growth<T> (rows: readonly T[], cost: (row: T) => number | undefined): number | undefined {
  if (rows.length < 2) return undefined
  const first = cost(rows[0]!)
  const last = cost(rows.at(-1)!)
  if (first === undefined || last === undefined || !(first > 0)) return undefined
  return last / first
}

function growthCheck (budget: string, parts: Array<[string, number | undefined]>): Check {
  const measured = parts.filter((p): p is [string, number] => p[1] !== undefined)
  const worst = measured.reduce<[string, number] | undefined>((w, p) => w === undefined || p[1] > w[1] ? p : w, undefined)
  return {
    budget,
    limit: `≤ ${GROWTH_LIMIT} × the smallest size's, per item`,
    measured: worst === undefined ? 'n/a' : `${worst[1].toFixed(2)} × (${worst[0]})`,
    pass: worst === undefined ? undefined : worst[1] <= GROWTH_LIMIT,
  }
}

export function storedReport (byStore: Record<string, StoredSizeResult[]>): { tables: Table[], curves: Curve[], checks: Check[] } {
  const stores = Object.keys(byStore)
  const table: Table = {
    title: 'stored tasks: requests one at a time from the load generator (ms), one sweep, and what the store takes',
    head: ['store', 'tasks', 'get p50', 'get p99', 'list 1st p50', 'list 1st p99', 'list mid p50', 'list mid p99', 'create p50', 'create p99',
      'sweep ms', 'swept', 'store MiB', 'bytes/task', 'fill s'],
    rows: stores.flatMap((store) => byStore[store]!.map((r) => [store, String(r.tasks), ms(r.get.p50), ms(r.get.p99),
      ms(r.listFirst.p50), ms(r.listFirst.p99),
      ms(r.listMiddle.p50), ms(r.listMiddle.p99), ms(r.create.p50), ms(r.create.p99), ms(r.sweepMs, 1), String(r.swept),
      r.storeBytes === undefined ? 'n/a' : (r.storeBytes / 1048576).toFixed(1), r.storeBytes === undefined ? 'n/a' : (r.storeBytes / r.tasks).toFixed(0),
      (r.fillMs / 1000).toFixed(1)])),
  }
  const sizes = byStore[stores[0]!]?.map((r) => r.tasks) ?? []
  const curve = (id: string, title: string, y: Curve['y'], pick: (r: StoredSizeResult) => Array<[string, number | undefined]>): Curve => {
    const names = byStore[stores[0]!]?.[0] === undefined ? [] : pick(byStore[stores[0]!]![0]!).map(([name]) => name)
    return {
      id,
      title,
      x: { label: 'stored tasks', values: sizes },
      y,
      series: stores.flatMap((store) => names.map((name, n) => ({ name: names.length > 1 ? `${store} ${name}` : store, values: byStore[store]!.map((r) => round(pick(r)[n]![1])) }))),
      log: true,
    }
  }
  const latency = { label: 'latency', unit: 'ms' }
  const curves = [
    curve('scale-stored-get', 'tasks/get latency by stored tasks', latency, (r) => [['p50', r.get.p50], ['p99', r.get.p99]]),
    curve('scale-stored-list-first', 'tasks/list, first page, latency by stored tasks', latency, (r) => [['p50', r.listFirst.p50], ['p99', r.listFirst.p99]]),
    curve('scale-stored-list-middle', 'tasks/list, a middle page, latency by stored tasks', latency, (r) => [['p50', r.listMiddle.p50], ['p99', r.listMiddle.p99]]),
    curve('scale-stored-create', 'task creation p99 by stored tasks', latency, (r) => [['p99', r.create.p99]]),
    curve('scale-stored-sweep', 'one sweep (a tenth of the tasks past their ttl) by stored tasks', { label: 'sweep time', unit: 'ms' }, (r) => [['sweep', r.sweepMs]]),
    curve('scale-stored-bytes', 'store size by stored tasks', { label: 'store size', unit: 'MiB' }, (r) => [['size', mibValue(r.storeBytes) ?? undefined]]),
  ]
  const checks = stores.map((store) => {
    const rows = byStore[store]!
    return growthCheck(`growth with stored tasks, ${store} store (${rows[0]?.tasks ?? '?'} → ${rows.at(-1)?.tasks ?? '?'})`, [
      ['tasks/get p50', growth(rows, (r) => r.get.p50)],
      ['tasks/list first page p50', growth(rows, (r) => r.listFirst.p50)],
      ['tasks/list middle page p50', growth(rows, (r) => r.listMiddle.p50)],
      ['creation p50', growth(rows, (r) => r.create.p50)],
      ['sweep per task removed', growth(rows, (r) => r.swept === 0 ? undefined : r.sweepMs / r.swept)],
      ['store bytes per task', growth(rows, (r) => r.storeBytes === undefined ? undefined : r.storeBytes / r.tasks)],
    ])
  })
  return { tables: [table], curves, checks }
}

export function sessionsReport (rows: SessionsSizeResult[]): { tables: Table[], curves: Curve[], checks: Check[] } {
  const table: Table = {
    title: 'open 2025-11-25 sessions, each with a GET stream: gateway memory after full GC (KiB per session, per stream) and ping latency meanwhile (ms)',
    head: ['sessions', 'heap idle MiB', 'heap loaded MiB', 'RSS loaded MiB', 'heap/session', 'RSS/session', 'heap/stream', 'RSS/stream', 'ping p50', 'ping p99', 'open s'],
    rows: rows.map((r) => [String(r.sessions), (r.idle.heapUsedBytes / 1048576).toFixed(1),
      (r.withStreams.heapUsedBytes / 1048576).toFixed(1),
      (r.withStreams.rssBytes / 1048576).toFixed(1), kib(r.perSession.heapBytes), kib(r.perSession.rssBytes),
      kib(r.perStream.heapBytes), kib(r.perStream.rssBytes),
      ms(r.ping.p50), ms(r.ping.p99), (r.openMs / 1000).toFixed(1)]),
  }
  const x = { label: 'open sessions', values: rows.map((r) => r.sessions) }
  const curves: Curve[] = [
    {
      id: 'scale-sessions-memory',
      title: 'gateway memory per open session and per GET stream',
      x,
      y: { label: 'memory', unit: 'KiB' },
      series: [
        { name: 'heap per session', values: rows.map((r) => round(r.perSession.heapBytes / 1024, 2)) },
        { name: 'RSS per session', values: rows.map((r) => round(r.perSession.rssBytes / 1024, 2)) },
        { name: 'heap per stream', values: rows.map((r) => round(r.perStream.heapBytes / 1024, 2)) },
        { name: 'RSS per stream', values: rows.map((r) => round(r.perStream.rssBytes / 1024, 2)) },
      ],
      log: true,
    },
    {
      id: 'scale-sessions-latency',
      title: 'ping latency with the sessions and streams open',
      x,
      y: { label: 'latency', unit: 'ms' },
      series: [{ name: 'p50', values: rows.map((r) => round(r.ping.p50)) }, { name: 'p99', values: rows.map((r) => round(r.ping.p99)) }],
      log: true,
    },
  ]
  const checks = [growthCheck(`growth with open sessions and GET streams (${rows[0]?.sessions ?? '?'} → ${rows.at(-1)?.sessions ?? '?'})`, [
    ['heap per session', growth(rows, (r) => r.perSession.heapBytes)],
    ['heap per stream', growth(rows, (r) => r.perStream.heapBytes)],
    ['ping p50', growth(rows, (r) => r.ping.p50)],
  ])]
  return { tables: [table], curves, checks }
}

export function watchReport (rows: WatchSizeResult[]): { tables: Table[], curves: Curve[], checks: Check[] } {
  const table: Table = {
    title: 'watched tasks: gateway CPU µs per watched task per second, and polls sent vs answered',
    head: ['tasks', 'watched by', 'window s', 'gateway CPU ms', 'µs/task/s', 'µs/poll', 'µs/task/s at interval', 'polls sent/s', 'polls answered/s',
      'mean suggested interval ms'],
    rows: rows.flatMap((r) => r.windows.map((w) => [String(r.tasks), w.mode, w.seconds.toFixed(1), w.gatewayCpuMs.toFixed(0),
      w.cpuUsPerTaskSecond.toFixed(2), w.cpuUsPerPoll === undefined ? '—' : w.cpuUsPerPoll.toFixed(0), w.cpuUsPerTaskSecondAtInterval.toFixed(2),
      w.mode.startsWith('polling') ? (w.pollsSent / w.seconds).toFixed(0) : '—', w.mode.startsWith('polling') ? (w.pollsAnswered / w.seconds).toFixed(0) : '—',
      w.meanSuggestedMs === undefined ? '—' : w.meanSuggestedMs.toFixed(0)])),
  }
  const curves: Curve[] = [{
    id: 'scale-watched-cpu',
    title: 'gateway CPU per watched task per second (polling: per poll × polls a second at the interval)',
    x: { label: 'watched tasks', values: rows.map((r) => r.tasks) },
    y: { label: 'CPU per task per second', unit: 'µs' },
    series: WATCH_MODES.map((mode) => ({
      name: mode,
      values: rows.map((r) => round(r.windows.find((w) => w.mode === mode)?.cpuUsPerTaskSecondAtInterval, 2)),
    })),
    log: true,
  }]
  const checks = [growthCheck(`growth with watched tasks (${rows[0]?.tasks ?? '?'} → ${rows.at(-1)?.tasks ?? '?'}), CPU per poll or per listened task per second`,
    WATCH_MODES.filter((m) => m !== 'idle').map((mode) => [mode, growth(rows, (r) => {
      const w = r.windows.find((x) => x.mode === mode)
      return w?.cpuUsPerPoll ?? w?.cpuUsPerTaskSecond
    })]))]
  return { tables: [table], curves, checks }
}

export function stdioReport (result: StdioScaleResult): { tables: Table[], curves: Curve[], checks: Check[] } {
  const table: Table = {
    title: `stdio upstream, sessions per-client: the gateway and every process under it (no client: ${result.idle.processes} processes, ` +
      `${(result.idle.rssBytes / 1048576).toFixed(1)} MiB RSS)`,
    head: ['clients', 'processes', 'RSS MiB', 'private MiB', 'processes/client', 'RSS/client MiB', 'private/client MiB'],
    rows: result.sizes.map((r) => [String(r.clients), String(r.processes), (r.rssBytes / 1048576).toFixed(1),
      (r.rssAnonBytes / 1048576).toFixed(1),
      r.perClient.processes.toFixed(2), (r.perClient.rssBytes / 1048576).toFixed(1), (r.perClient.rssAnonBytes / 1048576).toFixed(1)]),
  }
  const x = { label: 'clients (one upstream process each)', values: result.sizes.map((r) => r.clients) }
  const curves: Curve[] = [
    {
      id: 'scale-stdio-memory',
      title: 'gateway and upstream processes: memory by stdio clients',
      x,
      y: { label: 'memory', unit: 'MiB' },
      series: [
        { name: 'RSS, all processes', values: result.sizes.map((r) => mibValue(r.rssBytes)) },
        { name: 'private (RssAnon), all processes', values: result.sizes.map((r) => mibValue(r.rssAnonBytes)) },
      ],
      log: true,
    },
    {
      id: 'scale-stdio-processes',
      title: 'processes by stdio clients',
      x,
      y: { label: 'processes', unit: '' },
      series: [{ name: 'processes', values: result.sizes.map((r) => r.processes) }],
      log: true,
    },
  ]
  const rows = result.sizes
  const checks = [growthCheck(`growth with stdio clients (${rows[0]?.clients ?? '?'} → ${rows.at(-1)?.clients ?? '?'})`, [
    ['RSS per client', growth(rows, (r) => r.perClient.rssBytes)],
    ['processes per client', growth(rows, (r) => r.perClient.processes)],
  ])]
  return { tables: [table], curves, checks }
}
