import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client'
import { BucketHistogram, type HistogramSeries } from './bucket-histogram.ts'
import { GatewayError, RpcError } from '../errors.ts'
import type { ClassifiedMessage } from '../wire/classified-message.ts'
import { isTerminal, type TaskStatus } from '../wire/task-state.ts'
import type { RecentProblems } from './recent-problems.ts'

/** Request latency buckets (seconds): sub-millisecond polls up to minute-long synchronous calls. */
const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]
/** Task lifetime buckets (seconds): tasks run from a fraction of a second to hours. */
const TASK_BUCKETS = [0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600]
const UPSTREAM_STATES = ['starting', 'ready', 'down', 'closed'] as const

/** What the gauges read of an upstream at scrape time (an `Upstream` is one). */
export interface MeteredUpstream {
  readonly name: string
  readonly state: typeof UPSTREAM_STATES[number]
  readonly config: { readonly transport: string }
  readonly load: {
    readonly sessions: number
    /** Stdio only: the processes running (the gateway's own session's and one per client session). */
    readonly processes: number | undefined
    readonly active: number
    readonly waiting: number
    readonly parked: number
  }
  /** Reconnect attempts scheduled since start. */
  readonly reconnects: number
}

/** What the task counters read of a task (a stored `TaskRecord` is one). */
export interface MeteredTask {
  readonly id: string
  readonly era: string
  readonly status: TaskStatus
  readonly createdAt: number
}
const INPUT_METHODS = new Set(['elicitation/create', 'sampling/createMessage', 'roots/list'])
/** The request methods of both eras: the `method` label; any other method a client sends counts as `other`. */
const MCP_METHODS: ReadonlySet<string> = new Set([
  'initialize', 'ping', 'server/discover', 'subscriptions/listen', 'logging/setLevel', 'completion/complete',
  'tools/list', 'tools/call', 'prompts/list', 'prompts/get',
  'resources/list', 'resources/templates/list', 'resources/read', 'resources/subscribe', 'resources/unsubscribe',
  'tasks/get', 'tasks/result', 'tasks/list', 'tasks/cancel', 'tasks/update',
])

/** Which limit each refusal error stands for (the `limit` label of gateway_refusals_total). */
const REFUSALS: Partial<Record<string, string>> = {
  GW_ERR_SESSION_LIMIT: 'sessionsPerPrincipal',
  GW_ERR_STREAM_LIMIT: 'streamsPerSession',
  GW_ERR_TASK_LIMIT: 'maxActivePerPrincipal',
  GW_ERR_TASK_INPUT_LIMIT: 'maxQueuedInputs',
  GW_ERR_UPSTREAM_SESSION_LIMIT: 'maxSessions',
  GW_ERR_UPSTREAM_SESSION_SHARE: 'maxSessionsPerPrincipal',
  GW_ERR_UPSTREAM_BUSY: 'maxQueuedCalls',
  GW_ERR_UPSTREAM_SLOT_TIMEOUT: 'slotWaitTimeout',
  GW_ERR_HTTP_BODY_TOO_LARGE: 'maxBodyBytes',
  GW_ERR_STORED_BYTES_LIMIT: 'storedBytesPerPrincipal',
}

/**
 * A POSTed message as a bounded name (the `method` label, and the span name of a request): an MCP request
 * method, else a fixed word for its kind (`notification`, `response`, `invalid`) or for a method of no MCP
 * revision (`other`).
 */
export function methodLabel (message: ClassifiedMessage): string {
  if (message.kind === 'response' || message.kind === 'invalid') return message.kind
  const { method } = message
  if (MCP_METHODS.has(method)) return method
  return method.startsWith('notifications/') ? 'notification' : 'other'
}

/** What the gauges of current state read at scrape time. */
export interface MetricSources {
  upstreams: readonly MeteredUpstream[]
  /** SSE streams this process holds open. */
  streams (): number
  /** Whether this process still runs the task (its runner holds it). */
  running (taskId: string): boolean
  /** How many tasks this process runs. */
  runningCount (): number
  /** Whether the store answers, as `/readyz` reports it. */
  storeReady (): Promise<boolean>
}

/** The class of a failed upstream call: the gateway error code it maps to (a bounded set), lower-cased. */
export function errorClass (err: unknown): string {
  if (err instanceof GatewayError) return err.code.slice('GW_ERR_'.length).toLowerCase()
  if (err instanceof RpcError) return 'rpc_error'
  return 'internal'
}

/**
 * The gateway's Prometheus instruments, on a registry of its own (several gateways in one process do not
 * clash). Every label set is bounded: method names from the method tables, configured upstream names, tool
 * names from an upstream's catalog, statuses and error codes. Gauges of current state are read at scrape.
 */
export class GatewayMetrics {
  readonly registry = new Registry()
  readonly #backend: string
  readonly #requests: BucketHistogram
  /** The series of #requests by method, era and outcome. */
  readonly #requestSeries = new Map<string, Map<string, Map<string, HistogramSeries>>>()
  readonly #upstreamCalls: BucketHistogram
  readonly #queueWaits: BucketHistogram
  readonly #storeOperations: BucketHistogram
  readonly #storeErrors: Counter
  readonly #refusals: Counter
  readonly #tasksCreated: Counter
  readonly #tasksFinished: Counter
  readonly #taskDuration: BucketHistogram
  readonly #inputRequired: HistogramSeries
  readonly #inputs: Counter
  readonly #inputsSettled: Counter
  readonly #failovers: Counter
  readonly #busRefusals: Counter
  /** The instruments read at scrape time (kept so that they are plainly owned). */
  readonly #scraped: Array<Gauge | Counter> = []
  /** Tasks seen entering input_required, and since when (left out once they leave it or end). */
  readonly #inputSince = new Map<string, number>()
  /** Where refusals and failures are also kept with their messages (the admin dashboard); undefined without it. */
  readonly #problems: RecentProblems | undefined

  constructor (backend: string, sources: MetricSources, problems?: RecentProblems) {
    const registers = [this.registry]
    this.#backend = backend
    this.#problems = problems
    collectDefaultMetrics({ register: this.registry })
    this.#requests = new BucketHistogram({ name: 'gateway_request_duration_seconds', help: 'HTTP requests to the MCP path by JSON-RPC method, protocol era and outcome, from arrival to the end of the response', labelNames: ['method', 'era', 'outcome'], buckets: REQUEST_BUCKETS, registers })
    this.#upstreamCalls = new BucketHistogram({ name: 'gateway_upstream_call_duration_seconds', help: 'upstream tools/call requests by upstream, tool and outcome (ok, tool_error or an error class)', labelNames: ['upstream', 'tool', 'outcome'], buckets: REQUEST_BUCKETS, registers })
    this.#queueWaits = new BucketHistogram({ name: 'gateway_upstream_queue_wait_seconds', help: 'time calls waited for a free call slot of their upstream (maxConcurrentCalls)', labelNames: ['upstream'], buckets: REQUEST_BUCKETS, registers })
    this.#storeOperations = new BucketHistogram({ name: 'gateway_store_operation_duration_seconds', help: 'store operations by backend and operation', labelNames: ['backend', 'operation'], buckets: REQUEST_BUCKETS, registers })
    this.#storeErrors = new Counter({ name: 'gateway_store_errors_total', help: 'store operations that failed, by backend, operation and error class', labelNames: ['backend', 'operation', 'class'], registers })
    this.#refusals = new Counter({ name: 'gateway_refusals_total', help: 'requests and calls refused by a limit, by the option that sets it', labelNames: ['limit'], registers })
    this.#tasksCreated = new Counter({ name: 'gateway_tasks_created_total', help: 'tasks created by this process, by protocol era', labelNames: ['era'], registers })
    this.#tasksFinished = new Counter({ name: 'gateway_tasks_finished_total', help: 'tasks that reached a final status through this process', labelNames: ['status'], registers })
    this.#taskDuration = new BucketHistogram({ name: 'gateway_task_duration_seconds', help: 'task lifetime from creation to its final status', labelNames: ['status'], buckets: TASK_BUCKETS, registers })
    this.#inputRequired = new BucketHistogram({ name: 'gateway_task_input_required_seconds', help: 'time tasks spent in input_required, each stay from entering to leaving it', buckets: TASK_BUCKETS, registers }).series()
    this.#inputs = new Counter({ name: 'gateway_task_input_requests_total', help: 'input requests of upstreams queued for a task\'s client, by method', labelNames: ['method'], registers })
    this.#inputsSettled = new Counter({ name: 'gateway_task_input_requests_settled_total', help: 'queued input requests settled, by how (answered or expired)', labelNames: ['state'], registers })
    this.#failovers = new Counter({ name: 'gateway_task_failovers_total', help: 'unfinished tasks of a lost gateway process taken over by this one, by what was done (resumed, rerun, started: its call had not been sent upstream, or failed)', labelNames: ['action'], registers })
    this.#busRefusals = new Counter({ name: 'gateway_bus_refusals_total', help: 'messages from the bus between gateway processes that were refused, by reason (unsigned, bad_mac, stale, replayed, malformed) and channel', labelNames: ['reason', 'channel'], registers })
    this.#gauges(sources, registers)
  }

  #gauges (sources: MetricSources, registers: Registry[]): void {
    const inputSince = this.#inputSince
    this.#scraped.push(new Gauge({
      name: 'gateway_tasks_active',
      help: 'tasks this process runs, by status (working or input_required)',
      labelNames: ['status'],
      registers,
      collect () {
        let waiting = 0
        for (const taskId of inputSince.keys()) {
          if (sources.running(taskId)) waiting++
          else inputSince.delete(taskId)
        }
        this.set({ status: 'working' }, Math.max(0, sources.runningCount() - waiting))
        this.set({ status: 'input_required' }, waiting)
      },
    }))
    this.#scraped.push(new Gauge({ name: 'gateway_store_up', help: 'whether the store answers (1) or not (0), as /readyz reports it', registers, async collect () { this.set(await sources.storeReady() ? 1 : 0) } }))
    this.#scraped.push(new Gauge({ name: 'gateway_sse_streams_open', help: 'SSE streams this process holds open', registers, collect () { this.set(sources.streams()) } }))
    const perUpstream = (name: string, help: string, read: (upstream: MeteredUpstream) => number | undefined): void => {
      this.#scraped.push(new Gauge({
        name,
        help,
        labelNames: ['upstream'],
        registers,
        collect () {
          // An upstream a reload removed leaves the exposition with it.
          this.reset()
          for (const upstream of sources.upstreams) {
            const value = read(upstream)
            if (value !== undefined) this.set({ upstream: upstream.name }, value)
          }
        },
      }))
    }
    perUpstream('gateway_upstream_up', 'whether the upstream is ready (1) or not (0)', (u) => u.state === 'ready' ? 1 : 0)
    perUpstream('gateway_upstream_sessions', 'upstream sessions open or opening', (u) => u.load.sessions)
    perUpstream('gateway_upstream_processes', 'processes running for a stdio upstream: the gateway\'s own session\'s and one per client upstream session (as the admin API counts them)', (u) => u.load.processes)
    perUpstream('gateway_upstream_calls_active', 'upstream calls holding a call slot', (u) => u.load.active)
    perUpstream('gateway_upstream_calls_queued', 'upstream calls waiting for a call slot (queue depth)', (u) => u.load.waiting)
    perUpstream('gateway_upstream_calls_parked', 'upstream calls waiting on their client for an answer, which hold no call slot', (u) => u.load.parked)
    this.#scraped.push(new Gauge({
      name: 'gateway_upstream_state',
      help: 'the upstream\'s state: 1 for the state it is in, 0 for the others',
      labelNames: ['upstream', 'state'],
      registers,
      collect () {
        this.reset()
        for (const upstream of sources.upstreams) {
          for (const state of UPSTREAM_STATES) this.set({ upstream: upstream.name, state }, upstream.state === state ? 1 : 0)
        }
      },
    }))
    const seen = new Map<string, number>()
    this.#scraped.push(new Counter({
      name: 'gateway_upstream_reconnects_total',
      help: 'reconnect attempts scheduled after the upstream failed or went down',
      labelNames: ['upstream'],
      registers,
      collect () {
        for (const upstream of sources.upstreams) {
          this.inc({ upstream: upstream.name }, upstream.reconnects - (seen.get(upstream.name) ?? 0))
          seen.set(upstream.name, upstream.reconnects)
        }
      },
    }))
  }

  request (method: string, era: string, statusCode: number, seconds: number): void {
    const outcome = statusCode < 400 ? 'ok' : statusCode === 429 ? 'refused' : 'error'
    // Every request is counted: its series is found by three lookups of strings the caller already holds.
    let byEra = this.#requestSeries.get(method)
    if (byEra === undefined) {
      byEra = new Map()
      this.#requestSeries.set(method, byEra)
    }
    let byOutcome = byEra.get(era)
    if (byOutcome === undefined) {
      byOutcome = new Map()
      byEra.set(era, byOutcome)
    }
    let series = byOutcome.get(outcome)
    if (series === undefined) {
      series = this.#requests.series(method, era, outcome)
      byOutcome.set(outcome, series)
    }
    series.observe(seconds)
  }

  /** An upstream tools/call ended: `tool` is the upstream's own name for a tool of its catalog. */
  upstreamCall (upstream: string, tool: string, outcome: string, seconds: number): void {
    this.#upstreamCalls.series(upstream, tool, outcome).observe(seconds)
  }

  queueWait (upstream: string, seconds: number): void {
    this.#queueWaits.series(upstream).observe(seconds)
  }

  /** Counts `err` when it is a refusal by a limit; true when it was one. */
  refused (err: unknown): boolean {
    if (!(err instanceof GatewayError)) return false
    const limit = 'limit' in err && typeof err.limit === 'string' ? err.limit : REFUSALS[err.code]
    if (limit === undefined) return false
    this.#refusals.inc({ limit })
    this.#problems?.record('refusal', limit, err)
    return true
  }

  /** An upstream request failed (or was refused by one of the upstream's limits); a cancelled one did not fail. */
  upstreamFailed (upstream: string, err: unknown): void {
    if (this.refused(err) || (err instanceof GatewayError && err.code === 'GW_ERR_REQUEST_CANCELLED')) return
    this.#problems?.record('error', `upstream ${upstream}`, err)
  }

  /** The latency series of a store operation (`<part>.<method>`), for its caller to hold. */
  storeOperation (operation: string): HistogramSeries {
    return this.#storeOperations.series(this.#backend, operation)
  }

  storeError (operation: string, err: unknown): void {
    if (!this.refused(err)) this.#problems?.record('error', `store ${operation}`, err)
    this.#storeErrors.inc({ backend: this.#backend, operation, class: errorClass(err) })
  }

  taskCreated (task: MeteredTask): void {
    this.#tasksCreated.inc({ era: task.era })
  }

  /** A task moved to `task.status` at `now` (a compare-and-set that won). */
  taskMoved (task: MeteredTask, now: number): void {
    const since = this.#inputSince.get(task.id)
    if (task.status === 'input_required') {
      if (since === undefined) this.#inputSince.set(task.id, now)
      return
    }
    if (since !== undefined) {
      this.#inputSince.delete(task.id)
      this.#inputRequired.observe((now - since) / 1000)
    }
    if (isTerminal(task.status)) {
      this.#tasksFinished.inc({ status: task.status })
      this.#taskDuration.series(task.status).observe((now - task.createdAt) / 1000)
    }
  }

  inputQueued (method: string): void {
    this.#inputs.inc({ method: INPUT_METHODS.has(method) ? method : 'other' })
  }

  inputSettled (state: 'answered' | 'expired'): void {
    this.#inputsSettled.inc({ state })
  }

  /** A message on the bus between processes was refused (`channel`: its name in the table, without key). */
  busRefused (reason: string, channel: string): void {
    this.#busRefusals.inc({ reason, channel })
  }

  failovers (taken: { resumed: number, rerun: number, started: number, failed: number }): void {
    if (taken.resumed > 0) this.#failovers.inc({ action: 'resumed' }, taken.resumed)
    if (taken.rerun > 0) this.#failovers.inc({ action: 'rerun' }, taken.rerun)
    if (taken.started > 0) this.#failovers.inc({ action: 'started' }, taken.started)
    if (taken.failed > 0) this.#failovers.inc({ action: 'failed' }, taken.failed)
  }
}
