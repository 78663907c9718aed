import type { CallEngine, CallOrigin } from '../calls/call-engine.ts'
import { toWireError } from '../wire/error-replies.ts'
import { GatewayError, type WireError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import type { GatewayTracing, TaskRunTrace } from '../observability/tracing.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import { BUS, subscribeTo } from '../store/bus-channels.ts'
import type { SignalBus, TaskOutcome, TaskRecord, TaskStore } from '../store/types.ts'
import type { TaskStatus } from '../wire/task-state.ts'
import type { Live } from '../config/live.ts'
import type { TaskSupport } from '../config/schema.ts'
import type { UpstreamTaskHooks } from '../calls/upstream-call.ts'
import { answerOwed, unreachable, upstreamTaskPlan, type UpstreamLookup } from './upstream-task-link.ts'
import { taskClient } from '../upstream/client-ref.ts'
import type { TaskEvents } from './task-events.ts'
import type { TaskInputs } from './task-inputs.ts'
import { MAX_TIMER_MS } from '../config/units.ts'
import { finishTask } from './task-finish.ts'
import { TaskWrites, mirrorStatus, recordResume, type RunningTask } from './task-writes.ts'
import { settled } from '../observability/ignored.ts'
import type { HeldTaskLink } from './held-task-link.ts'

export interface TaskRunnerDeps {
  store: TaskStore
  /** The upstreams in the configuration in force (a reload may add and remove them). */
  upstreams: UpstreamLookup
  calls: CallEngine
  inputs: TaskInputs
  events: TaskEvents
  log: Logger
  /** Aborted when the gateway gives up on running work during shutdown. */
  shutdown: AbortSignal
  bus: SignalBus
  /** Whether the upstream itself runs this tool as a task (`optional` or `required`), by its own name. */
  nativeTaskSupport (upstream: string, tool: string): TaskSupport | undefined
  /** While the gateway starts, until its upstreams' tools are listed (what nativeTaskSupport knows); undefined after. */
  readonly listing?: Promise<void> | undefined
  /** Largest outcome (as JSON) a task stores (tasks.maxResultBytes); a larger one fails the task. */
  readonly maxResultBytes: Live<number>
  /** The bytes one principal's tasks may store (limits.storedBytesPerPrincipal): an outcome that does not fit fails its task. */
  readonly storedBytesPerPrincipal?: Live<number | undefined>
  /** Where each run of a task is traced; undefined when tracing is off. */
  tracing?: GatewayTracing | undefined
}

/** A running call a task takes over (see TaskRunner.adopt). */
export interface AdoptedCall {
  done: Promise<JsonObject>
  cancel (reason: unknown): void
  /** Where the call's upstream work runs, for another process to resume it; undefined when it cannot. */
  link?: HeldTaskLink | undefined
}

/**
 * Runs the upstream call of each task in the background, on its client's upstream session (which the
 * task keeps open until it ends, even when the client's session ended), and stores the outcome. A cancel
 * aborts the call; an outcome that arrives after a cancel is discarded by the store's compare-and-set.
 */
export class TaskRunner {
  readonly #deps: TaskRunnerDeps
  readonly #running = new Map<string, RunningTask>()
  /** The aborts of the upstream calls running now (see #callAbort). */
  readonly #calls = new Set<AbortController>()

  constructor (deps: TaskRunnerDeps) {
    this.#deps = deps
    deps.shutdown.addEventListener('abort', () => {
      for (const call of this.#calls) call.abort(deps.shutdown.reason)
    }, { once: true })
  }

  get size (): number {
    return this.#running.size
  }

  /** The tasks whose upstream calls run in this process now. */
  tasks (): TaskRecord[] {
    return [...this.#running.values()].map((running) => running.task)
  }

  /** Whether this process runs the task's upstream call. */
  has (taskId: string): boolean {
    return this.#running.has(taskId)
  }

  start (task: TaskRecord, authorization?: string): void {
    this.#track(task, (controller) => this.#run(task, controller, authorization))
  }

  /**
   * Takes over a call that is already running (a 2026-07-28 synchronous call that outlasted the decision
   * window): its outcome becomes the task's, and a cancel of the task stops it. Where its upstream work runs
   * (`link`) is recorded as a task's is: what is known already before this settles (before the client learns
   * of the task), the rest as it comes.
   */
  async adopt (task: TaskRecord, call: AdoptedCall): Promise<void> {
    this.#track(task, async (controller) => {
      const stop = (): void => call.cancel(controller.signal.reason)
      controller.signal.addEventListener('abort', stop, { once: true })
      const onShutdown = (): void => call.cancel(this.#deps.shutdown.reason)
      this.#deps.shutdown.addEventListener('abort', onShutdown, { once: true })
      // The call's upstream request stays under the request that started it; the run covers the rest.
      const run = this.#deps.tracing?.taskRun(task)
      let outcome: TaskOutcome
      try {
        outcome = { result: await call.done }
      } catch (err) {
        if (controller.signal.aborted) {
          run?.end(undefined)
          return
        }
        outcome = { error: toWireError(this.#deps.shutdown.aborted ? new GatewayError('GW_ERR_SHUTTING_DOWN', [], { cause: err }) : err) as WireError }
      } finally {
        this.#deps.shutdown.removeEventListener('abort', onShutdown)
      }
      await this.#running.get(task.id)?.recording
      const status = await this.#finish(task, outcome)
      run?.end(status)
    })
    const running = this.#running.get(task.id)
    if (call.link === undefined || running === undefined) return
    const attached = call.link.attach(async (resume) => {
      const write = recordResume(this.#deps, task, resume).then((recorded) => { if (recorded) running.resumable = true })
      // The handover waits for the write either way; its failure is logged below.
      running.recording = settled(write)
      await write.catch((err: unknown) => this.#deps.log.warn({ err, taskId: task.id }, 'could not record where the upstream work of a task runs: it cannot be resumed by another process'))
    })
    running.recording = attached
    await attached
  }

  #track (task: TaskRecord, work: (controller: AbortController) => Promise<void>): void {
    const controller = new AbortController()
    // A tasks/cancel served by another gateway process reaches this one through the bus.
    // A process that took the task over and resumes its upstream task says so: this one stops waiting, and
    // leaves the upstream task running.
    const unsubscribe = subscribeTo(this.#deps.bus, BUS.taskCancel, task.id, (message) => {
      controller.abort(message.handover === true
        ? new GatewayError('GW_ERR_TASK_HANDED_OVER', ['another gateway process resumed it'])
        : new GatewayError('GW_ERR_REQUEST_CANCELLED', ['task cancelled by the client']))
    })
    // A task past its TTL is gone for the client: stop its upstream call instead of holding a connection.
    const expiry = task.ttlMs === null
      ? undefined
      : setTimeout(() => {
        controller.abort(new GatewayError('GW_ERR_REQUEST_CANCELLED', ['the task reached its TTL']))
      }, Math.min(MAX_TIMER_MS, task.createdAt + task.ttlMs - Date.now()))
    expiry?.unref()
    // Tracked before the work begins: a call that finds no free slot is marked unsent before its first await.
    const running: RunningTask = { task, controller, done: Promise.resolve(), resumable: task.resume !== null && task.resume.kind !== 'unsent', unsent: false }
    this.#running.set(task.id, running)
    running.done = work(controller).catch((err: unknown) => {
      this.#deps.log.error({ err, taskId: task.id }, 'task runner failed')
    }).finally(() => {
      unsubscribe()
      clearTimeout(expiry)
      this.#running.delete(task.id)
    })
  }

  /** Aborts the task's upstream call (the task is already cancelled in the store). */
  cancel (taskId: string, reason: string): void {
    this.#running.get(taskId)?.controller.abort(new GatewayError('GW_ERR_REQUEST_CANCELLED', [reason]))
  }

  /**
   * Stops waiting for the upstream work of the running tasks that `which` picks (the call of each ends without
   * an outcome, its upstream task is not cancelled, its input requests stay pending), so that another process,
   * or this one's successor, goes on with them. A task still waiting for a call slot, marked unsent, is always
   * picked: nothing of it ran upstream, so whoever takes it over starts it. A task whose record of its upstream
   * work (or unsent mark) is being written is picked once the write is done. Returns the tasks stopped.
   */
  async handOver (which: (task: TaskRecord, resumable: boolean) => boolean): Promise<TaskRecord[]> {
    await Promise.all([...this.#running.values()].map(async (running) => { await running.recording }))
    const handed: TaskRecord[] = []
    for (const running of this.#running.values()) {
      if (!running.unsent && !which(running.task, running.resumable)) continue
      running.controller.abort(new GatewayError('GW_ERR_TASK_HANDED_OVER', ['this process is shutting down']))
      handed.push(running.task)
    }
    return handed
  }

  /** The tasks whose calls run in this process, as they were when their runs started. */
  get running (): TaskRecord[] {
    return [...this.#running.values()].map((running) => running.task)
  }

  /**
   * Stops the runs of tasks this process no longer owns, writing nothing (it was paused past its lease): those
   * `owners` maps to another process are left to it (an upstream task runs on, as in a handover); those it maps
   * to null ended meanwhile, and their calls are cancelled. Returns how many runs were stopped.
   */
  standDown (owners: ReadonlyMap<string, string | null>): number {
    let stopped = 0
    for (const running of this.#running.values()) {
      const owner = owners.get(running.task.id)
      if (owner === undefined || owner === running.task.owner) continue
      running.controller.abort(owner === null
        ? new GatewayError('GW_ERR_REQUEST_CANCELLED', ['the task ended while this gateway process was paused'])
        : new GatewayError('GW_ERR_TASK_HANDED_OVER', [`${owner} took it over while this process was paused`]))
      stopped++
    }
    return stopped
  }

  /** Resolves when every running task has ended (used by shutdown after the grace period). */
  async settled (): Promise<void> {
    await Promise.all([...this.#running.values()].map((r) => r.done))
  }

  /** `authorization`: the creator's own Authorization header, sent to an upstream with forwardAuthorization (a restarted task has none). */
  async #run (task: TaskRecord, controller: AbortController, authorization: string | undefined): Promise<void> {
    const run = this.#deps.tracing?.taskRun(task)
    try {
      // Awaited first: with tracing off, `run?.end(await …)` would not run the task at all.
      const status = await this.#runTraced(task, controller, authorization, run)
      run?.end(status)
    } catch (err) {
      run?.end(undefined, err)
      throw err
    }
  }

  /** Runs the task's call; returns the status it ended with (undefined when it was cancelled meanwhile). */
  async #runTraced (
    task: TaskRecord,
    controller: AbortController,
    authorization: string | undefined,
    run: TaskRunTrace | undefined,
  ): Promise<TaskStatus | undefined> {
    const call = this.#callAbort(controller.signal)
    const signal = call.signal
    try {
      return await this.#runCall(task, controller, signal, authorization, run)
    } finally {
      this.#calls.delete(call)
    }
  }

  /**
   * The abort of a task's upstream call: by a cancel of the task, or by the gateway's shutdown. Not an
   * `AbortSignal.any` per task (weak references and a finalizer each, a share of every task creation): one
   * listener on the shutdown signal aborts the calls of every running task.
   */
  #callAbort (cancel: AbortSignal): AbortController {
    const call = new AbortController()
    const shutdown = this.#deps.shutdown
    if (shutdown.aborted) {
      call.abort(shutdown.reason)
      return call
    }
    this.#calls.add(call)
    cancel.addEventListener('abort', () => { call.abort(cancel.reason) }, { once: true })
    return call
  }

  async #runCall (
    task: TaskRecord,
    controller: AbortController,
    signal: AbortSignal,
    authorization: string | undefined,
    run: TaskRunTrace | undefined,
  ): Promise<TaskStatus | undefined> {
    const { events, inputs } = this.#deps
    const upstream = this.#deps.upstreams.upstream(task.upstream)
    if (!upstream) {
      return await this.#finish(task, { error: toWireError(new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', [task.upstream, 'it is no longer configured'])) })
    }
    const writes = new TaskWrites(this.#deps, task, this.#running.get(task.id), controller)
    const origin: CallOrigin = {
      client: taskClient(task),
      capabilities: task.clientCapabilities,
      signal,
      ask: (method, params, inputSignal, upstreamRequestId) => run === undefined
        ? inputs.ask(task, method, params, inputSignal, upstreamRequestId)
        : run.inputRound(method, () => inputs.ask(task, method, params, inputSignal, upstreamRequestId)),
      progress: (progress) => events.progress(task, progress),
      notify: (method, params) => { events.notification(task, method, params) },
      upstreamTaskStatus: (status) => {
        mirrorStatus(this.#deps, task, status).catch((err: unknown) => this.#deps.log.warn({ err, taskId: task.id }, 'could not mirror the upstream task status'))
      },
      queued: (limit) => { writes.queued(limit, upstream.name) },
      sent: async () => { await writes.sent() },
      patient: true,
      authorization,
      trace: run,
      maxResultBytes: this.#deps.maxResultBytes,
    }
    // A task a starting process took over (from an earlier run) runs as the upstream's own task only if the tool
    // requires or allows it: which the upstream's tool list says, once it is read.
    const listing = this.#deps.listing
    // A failed listing (names colliding) is the gateway's `ready` to report; the plan then knows what it can.
    if (listing !== undefined) await settled(listing)
    const plan = upstreamTaskPlan(upstream, task.tool, this.#deps.nativeTaskSupport(task.upstream, task.tool))
    const upstreamTask: UpstreamTaskHooks = {
      resumable: plan.resumable,
      created: async (upstreamTaskId, address) => {
        if (address !== undefined) await writes.record({ kind: 'native', upstreamTaskId, ...address })
      },
      streamed: (resumptionToken, address) => { void writes.record({ kind: 'stream', resumptionToken, ...address }) },
    }
    if (task.resume !== null && task.resume.kind !== 'unsent') {
      upstreamTask.existing = task.resume
      upstreamTask.rejoined = (session) => { answerOwed(this.#deps, task, session, signal) }
    }
    origin.upstreamTask = upstreamTask
    let outcome: TaskOutcome
    try {
      const target = { upstream, target: task.tool, native: plan.native }
      outcome = { result: await this.#deps.calls.run(target, task.request, origin) }
    } catch (err) {
      if (controller.signal.aborted) return undefined
      outcome = { error: toWireError(this.#interrupted(task, err)) as WireError }
    }
    await writes.settled
    return await this.#finish(task, outcome)
  }

  /** What a failed call becomes: the gateway shut down, a resumed upstream task could not be reached, or the upstream's own error. */
  #interrupted (task: TaskRecord, err: unknown): unknown {
    if (this.#deps.shutdown.aborted) return new GatewayError('GW_ERR_SHUTTING_DOWN', [], { cause: err })
    return unreachable(task, err) ?? err
  }

  async #finish (task: TaskRecord, outcome: TaskOutcome): Promise<TaskStatus | undefined> {
    return await finishTask(this.#deps, task, outcome)
  }
}
