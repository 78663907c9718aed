import type { Route } from '../catalog/catalog-view.ts'
import type { Live } from '../config/live.ts'
import type { TasksConfig } from '../config/schema.ts'
import { withoutProgressToken } from '../wire/params.ts'
import { toWireError } from '../wire/error-replies.ts'
import { GatewayError } from '../errors.ts'
import { ignoreWithTrace } from '../observability/ignored.ts'
import type { Logger } from '../observability/logger.ts'
import type { RequestTrace } from '../observability/request-trace.ts'
import type { JsonObject, RequestId } from '../wire/jsonrpc.ts'
import { BUS, publishOn } from '../store/bus-channels.ts'
import type { SignalBus, TaskCursor, TaskRecord, TaskResume, TaskStore } from '../store/types.ts'
import type { TaskEvents } from './task-events.ts'
import type { TaskInputs } from './task-inputs.ts'
import type { AdoptedCall, TaskRunner } from './task-runner.ts'
import type { LostTasks } from './lost-tasks.ts'
import { moveTask, type TaskMoveDeps } from './task-moves.ts'
import { resumedWork } from './upstream-task-link.ts'
import { isTerminal, sourcesOf } from '../wire/task-state.ts'
import { randomId } from '../wire/random-id.ts'
import type { Revision } from '../wire/versions.ts'
import { withSuggestedPollInterval } from './poll-interval.ts'

export interface CreateTaskRequest {
  principal: string
  sessionId: string | null
  era: Revision
  route: Route
  /** The tools/call params as the client sent them. */
  params: JsonObject
  /** The ttl the client asked for, if any. */
  requestedTtl: number | undefined
  progressToken: RequestId | undefined
  clientCapabilities: JsonObject
  /** The caller's own Authorization header for an upstream that forwards it; kept in memory only, never stored. */
  authorization?: string | undefined
  /** Whom the task's limits count (Caller.account: the client address without auth); undefined: the principal. */
  account?: string | undefined
  /** The creating request's server span (tracing on): the root of the task's trace. */
  trace?: RequestTrace | undefined
}

const RELATED_TASK = 'io.modelcontextprotocol/related-task'

/** The client's `_meta` minus a related-task entry, which names no task of the upstream's. */
function withoutRelatedTask (params: JsonObject): JsonObject {
  const meta = params._meta as JsonObject | undefined
  if (!meta || !(RELATED_TASK in meta)) return params
  const { [RELATED_TASK]: _dropped, ...rest } = meta
  return { ...params, _meta: rest }
}

/** The shortest retention a task gets, so a client can always read the task it just created. */
export const MIN_TTL_MS = 1000

/** Clamps a requested retention to [MIN_TTL_MS, maxTtl]; no request means the default. */
export function effectiveTtl (requested: number | undefined, config: TasksConfig): number {
  const wanted = requested === undefined || !Number.isFinite(requested) || requested < 0 ? config.defaultTtl : Math.floor(requested)
  return Math.max(MIN_TTL_MS, Math.min(wanted, config.maxTtl))
}

export interface TaskServiceDeps {
  store: TaskStore
  runner: TaskRunner
  inputs: TaskInputs
  events: TaskEvents
  config: Live<TasksConfig>
  log: Logger
  bus: SignalBus
  /** This gateway process: the owner of the tasks it creates. */
  owner: string
  /** Whether a task's tool may run again after the process running it stopped. */
  isIdempotent (task: TaskRecord): boolean
  /** Whether the upstream work a task records (TaskRecord.resume) may be resumed: its upstream is configured, and allows it. */
  canResume (task: TaskRecord): boolean
  /** The bytes one principal's tasks may store (limits.storedBytesPerPrincipal); undefined: no budget. */
  readonly storedBytesPerPrincipal?: Live<number | undefined>
  /** The tasks a store emptied under the gateway lost (see LostTasks); undefined: no such store. */
  lost?: LostTasks | undefined
}

/** What a takeover did with the unfinished tasks it claimed. */
export interface TakeoverTally {
  /** Adopted: their upstream tasks are waited for again, as if nothing had happened. */
  resumed: number
  rerun: number
  /** Their calls had not left the lost process (they waited for a call slot): started here, as if nothing had happened. */
  started: number
  failed: number
}

/** Why a task's call stopped before it ended: the gateway restarted, its process was lost, or it handed the task over as it shut down. */
export type Interruption = 'restart' | 'lost' | 'handover'

const INTERRUPTED = {
  restart: { code: 'GW_ERR_TASK_RESTARTED', again: 'running again after a gateway restart' },
  lost: { code: 'GW_ERR_TASK_OWNER_LOST', again: 'running again after the gateway process running it was lost' },
  handover: { code: 'GW_ERR_TASK_RESTARTED', again: 'running again after the gateway process running it shut down' },
} as const

/** The statusMessage of a task whose call had not been sent upstream when its process stopped, started by another. */
const STARTED: Record<Interruption, string> = {
  restart: 'started after a gateway restart: its call had not been sent upstream',
  lost: 'started after the gateway process it waited in was lost: its call had not been sent upstream',
  handover: 'started after the gateway process it waited in shut down: its call had not been sent upstream',
}

/** A taken-over task whose call starts (again) here: working, from wherever it stood. */
const AGAIN = { from: sourcesOf('working'), to: 'working' } as const

/**
 * The owner of the tasks a process hands over as it shuts down: `<process>~handover`, whose lease has lapsed,
 * so that the other processes take them over at once while the process itself still runs.
 */
export function handoverOwner (processId: string): string {
  return `${processId}${HANDOVER_SUFFIX}`
}

const HANDOVER_SUFFIX = '~handover'

/**
 * The task lifecycle over the store: creation with limits, lookups that treat foreign ids exactly like
 * unknown ones, cancellation, and recovery of tasks that were running when the gateway stopped.
 */
export class TaskService {
  readonly #tasks: TaskStore
  readonly #runner: TaskRunner
  readonly #inputs: TaskInputs
  readonly #events: TaskEvents
  readonly #config: TasksConfig
  readonly #log: Logger

  readonly #bus: SignalBus
  readonly #owner: string
  readonly #isIdempotent: (task: TaskRecord) => boolean
  readonly #canResume: (task: TaskRecord) => boolean
  readonly #deps: TaskServiceDeps
  /** How this one moves a task (cancelled, failed, started again). */
  readonly #moves: TaskMoveDeps
  #handedOver = 0

  constructor (deps: TaskServiceDeps) {
    this.#deps = deps
    this.#moves = { store: deps.store, events: deps.events, bus: deps.bus, log: deps.log }
    this.#canResume = deps.canResume
    this.#bus = deps.bus
    this.#owner = deps.owner
    this.#isIdempotent = deps.isIdempotent
    this.#tasks = deps.store
    this.#runner = deps.runner
    this.#inputs = deps.inputs
    this.#events = deps.events
    this.#config = deps.config
    this.#log = deps.log
  }

  get config (): TasksConfig {
    return this.#config
  }

  /** Stores the task durably, then starts its upstream call in the background. */
  async create (request: CreateTaskRequest): Promise<TaskRecord> {
    const task = await this.#store(request)
    this.#runner.start(task, request.authorization)
    return task
  }

  /**
   * Stores a task for a call that is already running and hands the call to it; answers once where the call's
   * upstream work runs (known so far) is recorded too, so that the task the client learns of can be resumed.
   */
  async adopt (request: CreateTaskRequest, call: (task: TaskRecord) => AdoptedCall): Promise<TaskRecord> {
    const task = await this.#store(request)
    await this.#runner.adopt(task, call(task))
    return task
  }

  async #store (request: CreateTaskRequest): Promise<TaskRecord> {
    const now = Date.now()
    const { task: _task, name: _name, ...rest } = withoutRelatedTask(withoutProgressToken(request.params))
    const id = randomId()
    const name = request.params.name
    const task: TaskRecord = {
      id,
      principal: request.principal,
      sessionId: request.sessionId,
      era: request.era,
      status: 'working',
      statusMessage: null,
      createdAt: now,
      lastUpdatedAt: now,
      ttlMs: effectiveTtl(request.requestedTtl, this.#config),
      pollIntervalMs: this.#config.pollInterval,
      upstream: request.route.upstream.name,
      tool: request.route.target,
      request: rest,
      progressToken: request.progressToken ?? null,
      clientCapabilities: request.clientCapabilities,
      outcome: null,
      owner: this.#owner,
      traceContext: request.trace?.created({ id, upstream: request.route.upstream.name }, typeof name === 'string' ? name : undefined) ?? null,
      resume: null,
    }
    // The store counts (tasks and bytes) and inserts in one atomic step: racing creates never overshoot the limits.
    await this.#tasks.create(task, {
      maxActive: this.#config.maxActivePerPrincipal,
      maxStoredBytes: this.#deps.storedBytesPerPrincipal,
      ...(request.account !== undefined && { account: request.account }),
    })
    this.#deps.lost?.remember(task)
    this.#log.info({ audit: 'task.created', taskId: task.id, principal: task.principal, tool: task.tool, upstream: task.upstream, ttlMs: task.ttlMs }, 'task created')
    this.#events.created?.(task)
    return task
  }

  /**
   * The caller's task; unknown, expired and foreign ids all get the same error. `trace`: the server span of
   * the request asking (tracing on), which joins or links the task's trace.
   */
  async get (principal: string, taskId: string, trace?: RequestTrace): Promise<TaskRecord> {
    const now = Date.now()
    const task = await this.#tasks.get(taskId, now)
    if (!task) throw await this.#deps.lost?.lostError(taskId, principal) ?? new GatewayError('GW_ERR_TASK_NOT_FOUND', [taskId])
    if (task.principal !== principal) throw new GatewayError('GW_ERR_TASK_NOT_FOUND', [taskId])
    this.#deps.lost?.remember(task)
    trace?.task(task)
    return withSuggestedPollInterval(task, now, this.#config.pollIntervalMax)
  }

  /** Records (audit log) that a principal was handed a task's outcome. */
  retrieved (task: TaskRecord, via: string): void {
    this.#log.info({ audit: 'task.retrieved', taskId: task.id, principal: task.principal, status: task.status, via }, 'task outcome retrieved')
  }

  async list (principal: string, after: TaskCursor | undefined, limit: number): Promise<TaskRecord[]> {
    const now = Date.now()
    const page = await this.#tasks.list(principal, after, limit, now)
    return page.map((task) => withSuggestedPollInterval(task, now, this.#config.pollIntervalMax))
  }

  /**
   * Moves the task to cancelled before answering, then stops its upstream call (on whichever process runs it).
   * `by`: who asked, the principal itself or an operator through the admin API (said in the statusMessage).
   */
  async cancel (principal: string, taskId: string, by: 'client' | 'operator' = 'client', trace?: RequestTrace): Promise<TaskRecord> {
    const current = await this.get(principal, taskId, trace)
    if (isTerminal(current.status)) throw new GatewayError('GW_ERR_TASK_TERMINAL', [taskId, current.status])
    const updated = await moveTask(this.#moves, taskId, { from: sourcesOf('cancelled'), to: 'cancelled' }, { statusMessage: `cancelled by the ${by}`, by: this.#owner })
    if (!updated) {
      const now = await this.get(principal, taskId)
      throw new GatewayError('GW_ERR_TASK_TERMINAL', [taskId, now.status])
    }
    this.#runner.cancel(taskId, `task cancelled by the ${by}`)
    await publishOn(this.#bus, BUS.taskCancel, taskId, { taskId })
    await this.#inputs.expireAll(taskId, new GatewayError('GW_ERR_REQUEST_CANCELLED', ['task cancelled']))
    this.#log.info({ audit: 'task.cancelled', taskId, principal, by }, 'task cancelled')
    return updated
  }

  /** Cancels every running task of a principal (its anonymous session ended, so nobody can reach them). */
  async cancelAllOf (principal: string): Promise<number> {
    let cancelled = 0
    let after: TaskCursor | undefined
    for (;;) {
      const page = await this.#tasks.list(principal, after, 500, Date.now())
      for (const task of page) {
        if (isTerminal(task.status)) continue
        // It may have ended since it was listed (a cancel then refuses) or the store may refuse: its ttl removes it.
        await this.cancel(principal, task.id).then(() => cancelled++, ignoreWithTrace(this.#log, 'a task of an ended session could not be cancelled', { taskId: task.id }))
      }
      const last = page.at(-1)
      if (page.length < 500 || !last) return cancelled
      after = { createdAt: last.createdAt, id: last.id }
    }
  }

  /**
   * Takes over the unfinished tasks of earlier runs in a store only this process uses, after a restart.
   * Their processes are gone: the store is held by this process alone (the SQLite file lock refuses a
   * second live process), so only this process's own tasks could still be running, and they are left alone.
   */
  async recover (): Promise<TakeoverTally> {
    const earlier = (await this.#tasks.unfinished()).filter((task) => task.owner !== this.#owner)
    const tally = await this.#takeOver(earlier, 'restart')
    if (tally.resumed + tally.rerun + tally.started + tally.failed > 0) this.#log.warn(tally, 'recovered tasks interrupted by a restart')
    return tally
  }

  /** Takes over the unfinished tasks of a gateway process whose lease lapsed (or that one handed over). */
  async adoptOrphans (owner: string): Promise<TakeoverTally> {
    const tally = await this.#takeOver(await this.#tasks.ownedBy(owner, Date.now()), owner.endsWith(HANDOVER_SUFFIX) ? 'handover' : 'lost')
    if (tally.resumed + tally.rerun + tally.started + tally.failed > 0) this.#log.warn({ ...tally, lostProcess: owner }, 'took over the tasks of a lost gateway process')
    return tally
  }

  /**
   * Claims each task (only one process wins it), then resumes it when its upstream task can be reached again,
   * starts it when its call never left the process that stopped (it waited for a call slot), runs it again when
   * its tool is idempotent, and otherwise fails it with a statusMessage saying why.
   */
  async #takeOver (tasks: TaskRecord[], why: Interruption): Promise<TakeoverTally> {
    let resumed = 0
    let rerun = 0
    let started = 0
    let failed = 0
    for (const task of tasks) {
      const claimed = await this.#tasks.claim(task.id, task.owner, this.#owner, Date.now())
      if (!claimed) continue
      if (claimed.resume?.kind === 'unsent') {
        if (await this.#start(claimed, why)) started++
        continue
      }
      if (claimed.resume !== null && this.#canResume(claimed)) {
        await this.#resume(claimed, claimed.resume, why)
        resumed++
        continue
      }
      const error = new GatewayError(INTERRUPTED[why].code)
      await this.#inputs.expireAll(task.id, error)
      // A process declared lost may only be stalled: if it wakes up, it drops the call instead of racing us.
      if (why === 'lost') await publishOn(this.#bus, BUS.taskCancel, task.id, { taskId: task.id })
      if (this.#isIdempotent(claimed)) {
        const again = { statusMessage: INTERRUPTED[why].again, resume: null, by: this.#owner, asOwner: this.#owner }
        const restarted = await moveTask(this.#moves, task.id, AGAIN, again)
        if (restarted) {
          this.#runner.start(restarted)
          rerun++
        }
        continue
      }
      const failure = { statusMessage: error.message, outcome: { error: toWireError(error) }, by: this.#owner, asOwner: this.#owner }
      const updated = await moveTask(this.#moves, task.id, { from: sourcesOf('failed'), to: 'failed' }, failure)
      if (updated) failed++
    }
    return { resumed, rerun, started, failed }
  }

  /**
   * Starts a claimed task whose call never left the process that stopped: nothing of it ran upstream, whatever
   * the tool. A process declared lost that wakes up drops the call instead of sending it too.
   */
  async #start (task: TaskRecord, why: Interruption): Promise<boolean> {
    if (why === 'lost') await publishOn(this.#bus, BUS.taskCancel, task.id, { taskId: task.id })
    const started = { statusMessage: STARTED[why], resume: null, by: this.#owner, asOwner: this.#owner }
    const restarted = await moveTask(this.#moves, task.id, AGAIN, started)
    if (!restarted) return false
    this.#log.info({ taskId: task.id, upstream: task.upstream, tool: task.tool, from: task.owner, why }, 'starting a task whose call another gateway process had not sent upstream')
    this.#runner.start(restarted)
    return true
  }

  /**
   * Adopts a claimed task whose upstream task can be reached again: the input requests the upstream can still
   * be answered on stay pending (the client answers them as before), the others expire; a process declared
   * lost that wakes up stops waiting without cancelling the upstream task; this one waits for its result.
   */
  async #resume (task: TaskRecord, resume: TaskResume, why: Interruption): Promise<void> {
    for (const input of await this.#tasks.pendingInputs(task.id)) {
      if (input.upstreamRequestId === undefined) await this.#tasks.settleInput(input.key, 'expired', null, Date.now())
    }
    if (why === 'lost') await publishOn(this.#bus, BUS.taskCancel, task.id, { taskId: task.id, handover: true })
    this.#log.info({ taskId: task.id, upstream: task.upstream, tool: task.tool, resumes: resumedWork(resume), from: task.owner, why }, 'resuming the upstream work of a task another gateway process ran')
    this.#runner.start(task)
  }

  /** Whether the task's tool may run again from the start (toolSettings.<tool>.idempotent). */
  idempotent (task: TaskRecord): boolean {
    return this.#isIdempotent(task)
  }

  /** Tasks this process handed over as it shut down (see handOver). */
  get handedOver (): number {
    return this.#handedOver
  }

  /**
   * Leaves tasks whose calls this process stopped (TaskRunner.handOver) to others: with a shared store they go to
   * `to` (see handoverOwner), which other processes take over; in a store only this process uses, they stay as
   * they are, and the next process on the store takes them over when it starts. Returns how many were left.
   */
  async handOver (tasks: readonly TaskRecord[], to: string | undefined): Promise<number> {
    let handed = 0
    for (const task of tasks) {
      if (to === undefined || await this.#tasks.claim(task.id, this.#owner, to, Date.now()) !== null) handed++
    }
    this.#handedOver += handed
    if (handed > 0) this.#log.info({ handedOver: handed, to: to ?? 'the next process on the store' }, 'handed running tasks over')
    return handed
  }

  async sweep (): Promise<number> {
    return await this.#tasks.sweep(Date.now())
  }
}
