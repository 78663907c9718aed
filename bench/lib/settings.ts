// Bench settings, all overridable through the environment. Defaults keep a full run to a few minutes
// on two cores: a few seconds of start-up, 3 × BENCH_CALLS sequential calls and 3 × BENCH_SECONDS of load
// (direct, forwarder floor, gateway), then the task sections (3 × BENCH_TASK_CREATES creations and as many
// tasks/get, 3 × BENCH_SECONDS of tasks/get plus the Fastify floor's windows: memory, sqlite, redis and
// postgres store; the same again on three processes sharing Redis, then PostgreSQL; 4 × BENCH_MEMORY_TASKS
// creations for the memory measurement).
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export type GatewayMode = 'child' | 'inprocess'

export interface Settings {
  /** Sequential calls per path at concurrency 1 (BENCH_CALLS). */
  calls: number
  /** Sequential warm-up calls per path before anything is measured (BENCH_WARMUP). */
  warmup: number
  /** Seconds of load per path at high concurrency (BENCH_SECONDS). */
  seconds: number
  /** Concurrent workers in the load phase (BENCH_CONCURRENCY). */
  concurrency: number
  /** Each measurement is split into this many alternating direct/gateway rounds, to spread drift (BENCH_ROUNDS). */
  rounds: number
  /** Where the gateway runs (BENCH_GATEWAY): its own process (default, fairer) or inside the bench process. */
  gatewayMode: GatewayMode
  /** `--log-level` of the gateway (BENCH_GATEWAY_LOG_LEVEL, default warn). */
  gatewayLogLevel: string
  /** Extra node flags for the gateway child, split on spaces (BENCH_GATEWAY_NODE_ARGS, e.g. `--cpu-prof --cpu-prof-dir=/tmp/p`). */
  gatewayNodeArgs: string[]
  /**
   * Store of the default gateway, the one sync-call uses (BENCH_STORE): memory (default) or sqlite (a fresh
   * file in the temp directory). The task sections always measure both.
   */
  store: 'memory' | 'sqlite'
  /** upstreams[].maxConcurrentCalls of the gateway (BENCH_MAX_CONCURRENT_CALLS); undefined keeps the gateway default. */
  maxConcurrentCalls: number | undefined
  /** Long-running tasks put in flight before task creation is measured (BENCH_TASKS_IN_FLIGHT). */
  tasksInFlight: number
  /** Task creations measured at concurrency 1 per store (BENCH_TASK_CREATES). */
  taskCreates: number
  /** Tasks in flight when the memory per task is measured (BENCH_MEMORY_TASKS). */
  memoryTasks: number
  /**
   * Redis for the redis-store measurements (BENCH_REDIS_URL, else REDIS_URL, else the machine's); each gateway
   * gets a fresh key prefix, deleted afterwards.
   */
  redisUrl: string
  /**
   * PostgreSQL for the postgres-store measurements (BENCH_POSTGRES_URL, else POSTGRES_URL, else the machine's);
   * each gateway gets a fresh schema, dropped afterwards.
   */
  postgresUrl: string
  /**
   * Stores the task sections measure (BENCH_STORES, comma separated: memory, sqlite, redis, postgres); undefined
   * measures memory, sqlite and, when their servers answer, redis and postgres.
   */
  stores: Array<'memory' | 'sqlite' | 'redis' | 'postgres'> | undefined
  /** Section ids to run (BENCH_SECTIONS, comma separated); undefined runs every registered section. */
  sections: string[] | undefined
  /** When set, sections write V8 CPU profiles of the gateway's measured windows here (BENCH_PROFILE_DIR). */
  profileDir: string | undefined
  /**
   * Whether the gateways of the run keep Prometheus metrics (BENCH_METRICS: on, the gateway default, or off);
   * section metrics-cost always measures both.
   */
  metrics: 'on' | 'off'
  /** Section scale: stored tasks per store at each size (BENCH_SCALE_TASKS, comma separated). */
  scaleTasks: number[]
  /** Section scale: open 2025-11-25 sessions, each with a GET stream, at each size (BENCH_SCALE_SESSIONS). */
  scaleSessions: number[]
  /** Section scale: tasks being watched (polled, or listened to) at each size (BENCH_SCALE_WATCHED). */
  scaleWatched: number[]
  /** Section scale: stdio upstream sessions per client (one process each) at each size (BENCH_SCALE_STDIO). */
  scaleStdio: number[]
  /** Section scale: the figures to measure (BENCH_SCALE_FIGURES, comma separated: stored, sessions, watched, stdio); default all. */
  scaleFigures: Array<'stored' | 'sessions' | 'watched' | 'stdio'>
  /** Results file (BENCH_OUT). */
  out: string
}

function integer (env: NodeJS.ProcessEnv, name: string, fallback: number, min: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer ≥ ${min}, got '${raw}'`)
  return value
}

function positive (env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got '${raw}'`)
  return value
}

/** Comma-separated integers ≥ `min`, ascending (the sizes of a scale figure). */
function sizes (env: NodeJS.ProcessEnv, name: string, fallback: number[], min = 1): number[] {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const values = raw.split(',').map((part) => Number(part.trim().replaceAll('_', '')))
  if (values.some((v) => !Number.isInteger(v) || v < min)) throw new Error(`${name} must be comma-separated integers ≥ ${min}, got '${raw}'`)
  return [...new Set(values)].sort((a, b) => a - b)
}

function oneOf<T extends string> (env: NodeJS.ProcessEnv, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (!(allowed as readonly string[]).includes(raw)) throw new Error(`${name} must be one of ${allowed.join(', ')}, got '${raw}'`)
  return raw as T
}

/** The settings `env` gives (default: this process's environment); `readSettings({})` gives the defaults. */
export function readSettings (env: NodeJS.ProcessEnv = process.env): Settings {
  const maxCalls = env.BENCH_MAX_CONCURRENT_CALLS
  const sections = env.BENCH_SECTIONS
  const stores = env.BENCH_STORES
  return {
    calls: integer(env, 'BENCH_CALLS', 3000, 1),
    warmup: integer(env, 'BENCH_WARMUP', 500, 0),
    seconds: positive(env, 'BENCH_SECONDS', 5),
    concurrency: integer(env, 'BENCH_CONCURRENCY', 64, 1),
    rounds: integer(env, 'BENCH_ROUNDS', 2, 1),
    gatewayMode: oneOf(env, 'BENCH_GATEWAY', ['child', 'inprocess'] as const, 'child'),
    gatewayLogLevel: oneOf(env, 'BENCH_GATEWAY_LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, 'warn'),
    gatewayNodeArgs: (env.BENCH_GATEWAY_NODE_ARGS ?? '').split(' ').filter((a) => a !== ''),
    store: oneOf(env, 'BENCH_STORE', ['memory', 'sqlite'] as const, 'memory'),
    maxConcurrentCalls: maxCalls === undefined || maxCalls === '' ? undefined : integer(env, 'BENCH_MAX_CONCURRENT_CALLS', 16, 1),
    tasksInFlight: integer(env, 'BENCH_TASKS_IN_FLIGHT', 1000, 0),
    taskCreates: integer(env, 'BENCH_TASK_CREATES', 2000, 1),
    memoryTasks: integer(env, 'BENCH_MEMORY_TASKS', 10_000, 1),
    redisUrl: env.BENCH_REDIS_URL ?? env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    postgresUrl: env.BENCH_POSTGRES_URL ?? env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    stores: stores === undefined || stores === '' ? undefined : stores.split(',').map((s) => oneOf({ BENCH_STORES: s.trim() }, 'BENCH_STORES', ['memory', 'sqlite', 'redis', 'postgres'] as const, 'memory')),
    sections: sections === undefined || sections === '' ? undefined : sections.split(',').map((s) => s.trim()).filter((s) => s !== ''),
    profileDir: env.BENCH_PROFILE_DIR === '' ? undefined : env.BENCH_PROFILE_DIR,
    metrics: oneOf(env, 'BENCH_METRICS', ['on', 'off'] as const, 'on'),
    scaleTasks: sizes(env, 'BENCH_SCALE_TASKS', [1000, 10_000, 100_000]),
    scaleSessions: sizes(env, 'BENCH_SCALE_SESSIONS', [100, 1000, 5000]),
    scaleWatched: sizes(env, 'BENCH_SCALE_WATCHED', [1000, 10_000]),
    scaleStdio: sizes(env, 'BENCH_SCALE_STDIO', [10, 50, 100]),
    scaleFigures: env.BENCH_SCALE_FIGURES === undefined || env.BENCH_SCALE_FIGURES === ''
      ? ['stored', 'sessions', 'watched', 'stdio']
      : env.BENCH_SCALE_FIGURES.split(',').map((f) => oneOf({ BENCH_SCALE_FIGURES: f.trim() }, 'BENCH_SCALE_FIGURES', ['stored', 'sessions', 'watched', 'stdio'] as const, 'stored')),
    out: env.BENCH_OUT ?? join(tmpdir(), 'mcp-task-gateway-bench', 'latest.json'),
  }
}
