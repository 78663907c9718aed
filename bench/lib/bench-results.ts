// The shape of the bench's JSON results (written by bench/run.ts) as the page reads them, the history of runs
// kept beside the page (docs/benchmarks-history.json), and the main ratios that the history keeps of each run.
import type { Check, SectionResult } from './types.ts'

/** The JSON results are read as written by bench/run.ts, without a schema: a missing field shows as n/a. */
export type Json = Record<string, any>

export interface Results {
  environment: { date: string, node: string, platform: string, cpus: number, cpuModel: string, loadavg: number[], git: string | null }
  settings: Json
  checks: Array<Check & { section: string }>
  sections: Record<string, SectionResult & { title: string, data: Json }>
}

export interface HistoryRow {
  date: string
  git: string | null
  /** `default`, or the settings that differed from the defaults. */
  settings: string
  ratios: Record<string, number | null>
  /** Budgets met, and budgets measured (PASS or FAIL). */
  budgets: [number, number]
}

/**
 * A change that moved the numbers, and what it bought: entered by hand in the history file (`fixes`, oldest
 * first) by whoever made it, measured before and after in one session (the same section, minutes apart).
 */
export interface Fix {
  /** The commit (short hash) or range that made the change. */
  commit: string
  what: string
  /** What it bought: the ratio or cost before → after, and how it was measured. */
  measured: string
}

export interface History { generatedBy: string, runs: HistoryRow[], fixes?: Fix[] }

/** The charts of the history: one per family of ratios that share a unit (bench/lib/history-charts.ts). */
export type RatioFamily = 'sync-latency' | 'sync-throughput' | 'tasks-get' | 'task-create'

export interface MainRatio {
  id: string
  label: string
  /** ×: a latency over its floor's, lower is better; %: a throughput over its floor's, higher is better. */
  unit: '×' | '%'
  family: RatioFamily
  of: (r: Results) => unknown
  /** The budget the run was held to, as the section recorded it in its data; undefined when it did not. */
  budget: (r: Results) => unknown
}

const sync = (r: Results): Json | undefined => r.sections['sync-call']?.data
const get = (r: Results): Json | undefined => r.sections['task-get']?.data
const create = (r: Results): Json | undefined => r.sections['task-create']?.data
const cluster = (r: Results, store: 'redis' | 'postgres'): Json | undefined => r.sections['task-cluster']?.data[store]

/** The main ratios, one history column each: where each comes from in the results, how it reads, and its budget. */
export const MAIN_RATIOS: readonly MainRatio[] = [
  { id: 'sync.addedP50', label: 'sync +p50', unit: '×', family: 'sync-latency', of: (r) => sync(r)?.ratios?.gateway?.addedP50, budget: (r) => sync(r)?.limits?.addedRatio },
  { id: 'sync.throughput', label: 'sync c=64', unit: '%', family: 'sync-throughput', of: (r) => sync(r)?.ratios?.gateway?.throughputToForwarder, budget: (r) => sync(r)?.limits?.throughputRatio },
  { id: 'sync2026.addedP50', label: 'sync +p50 2026', unit: '×', family: 'sync-latency', of: (r) => sync(r)?.ratios?.['gateway 2026-07-28']?.addedP50, budget: (r) => sync(r)?.limits?.addedRatio },
  { id: 'sync2026.throughput', label: 'sync c=64 2026', unit: '%', family: 'sync-throughput', of: (r) => sync(r)?.ratios?.['gateway 2026-07-28']?.throughputToForwarder, budget: (r) => sync(r)?.limits?.throughputRatio },
  { id: 'get.memory', label: 'tasks/get memory', unit: '%', family: 'tasks-get', of: (r) => get(r)?.memory?.ratioToFloor, budget: (r) => get(r)?.ratioLimit },
  { id: 'get.sqlite', label: 'tasks/get sqlite', unit: '%', family: 'tasks-get', of: (r) => get(r)?.sqlite?.ratioToFloor, budget: (r) => get(r)?.ratioLimit },
  { id: 'get2026.memory', label: 'tasks/get memory 2026', unit: '%', family: 'tasks-get', of: (r) => get(r)?.['memory 2026-07-28']?.ratioToFloor, budget: (r) => get(r)?.ratioLimit },
  { id: 'get2026.sqlite', label: 'tasks/get sqlite 2026', unit: '%', family: 'tasks-get', of: (r) => get(r)?.['sqlite 2026-07-28']?.ratioToFloor, budget: (r) => get(r)?.ratioLimit },
  { id: 'get.cluster', label: 'tasks/get 3 processes', unit: '%', family: 'tasks-get', of: (r) => cluster(r, 'redis')?.ratios?.tasksGetToFloor, budget: (r) => cluster(r, 'redis')?.limits?.tasksGetRatio },
  { id: 'get.cluster.postgres', label: 'tasks/get 3 processes postgres', unit: '%', family: 'tasks-get', of: (r) => cluster(r, 'postgres')?.ratios?.tasksGetToFloor, budget: (r) => cluster(r, 'postgres')?.limits?.tasksGetRatio },
  { id: 'create.memory', label: 'create p99 memory', unit: '×', family: 'task-create', of: (r) => create(r)?.p99RatioToTasksGet?.memory, budget: (r) => create(r)?.limits?.p99Ratio },
  { id: 'create.sqlite', label: 'create p99 sqlite', unit: '×', family: 'task-create', of: (r) => create(r)?.p99RatioToTasksGet?.sqlite, budget: (r) => create(r)?.limits?.p99Ratio },
  { id: 'create2026.memory', label: 'create p99 memory 2026', unit: '×', family: 'task-create', of: (r) => create(r)?.p99RatioToTasksGet?.['memory 2026-07-28'], budget: (r) => create(r)?.limits?.p99Ratio },
  { id: 'create2026.sqlite', label: 'create p99 sqlite 2026', unit: '×', family: 'task-create', of: (r) => create(r)?.p99RatioToTasksGet?.['sqlite 2026-07-28'], budget: (r) => create(r)?.limits?.p99Ratio },
  { id: 'create.cluster', label: 'create p99 3 processes', unit: '×', family: 'task-create', of: (r) => cluster(r, 'redis')?.ratios?.createP99ToTasksGetP99, budget: (r) => cluster(r, 'redis')?.limits?.p99Ratio },
  { id: 'create.cluster.postgres', label: 'create p99 3 processes postgres', unit: '×', family: 'task-create', of: (r) => cluster(r, 'postgres')?.ratios?.createP99ToTasksGetP99, budget: (r) => cluster(r, 'postgres')?.limits?.p99Ratio },
]
