import type { CallEngine, CallOrigin } from '../calls/call-engine.ts'
import { toWireError } from '../wire/error-replies.ts'
import { GatewayError, type WireError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import type { GatewayTracing, TaskRunTrace } from '../observability/tracing.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import { BUS, subscribeTo } from '../store/bus-channels.ts'
import type { SignalBus, TaskOutcome, TaskPatch, TaskRecord, TaskResume, TaskStore } from '../store/types.ts'
import type { TaskStatus } from '../wire/task-state.ts'
import type { TaskSupport } from '../config/schema.ts'
import type { UpstreamTaskHooks } from '../calls/upstream-call.ts'
import { answerOwed, unreachable, upstreamTaskPlan } from './upstream-task-link.ts'
import { taskClient } from '../upstream/client-ref.ts'
import type { Upstream } from '../upstream/upstream.ts'
import type { TaskEvents } from './task-events.ts'
import type { TaskInputs } from './task-inputs.ts'
import { MAX_TIMER_MS } from '../config/units.ts'
import { whileStoreUnavailable } from './store-retry.ts'
import { QUEUED, isTerminal, restatement } from '../wire/task-state.ts'
import { finishTask } from './task-finish.ts'
import type { HeldTaskLink } from './held-task-link.ts'

export interface TaskRunnerDeps {
  store: TaskStore
  /** The upstream of that name in the configuration in force (a reload may add and remove them). */
  upstreams: { get (name: string): Upstream | undefined }
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
  maxResultBytes: number
  /** The bytes one principal's tasks may store (limits.storedBytesPerPrincipal): an outcome that does not fit fails its task. */
  readonly storedBytesPerPrincipal?: number | undefined
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

/** A task whose upstream call runs in this process. */
interface RunningTask {
  task: TaskRecord
  controller: AbortController
  done: Promise<void>
  /** Its upstream task is recorded (TaskRecord.resume): another process can go on with it. */
  resumable: boolean
  /** The store marks it unsent (it waits for a call slot) and its call has not begun to leave: another process may start it. */
  unsent: boolean
  /** The write of either record, while it is on its way to the store. */
  recording?: Promise<void>
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
      const write = this.#recordResume(task, resume).then((recorded) => { if (recorded) running.resumable = true })
      running.recording = write.catch(() => {})
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
    const upstream = this.#deps.upstreams.get(task.upstream)
    if (!upstream) {
      return await this.#finish(task, { error: toWireError(new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', [task.upstream, 'it is no longer configured'])) })
    }
    // Status messages are written in order: a "queued" write never lands after the one that clears it.
    let statusWrites = Promise.resolve()
    let queued = false
    // Once sent, the call waits for a slot again only when its input was answered: the task may still show input_required.
    let sent = false
    // A call that waits for a slot before it is first sent (not a resumed one) is marked unsent (TaskRecord.resume) by its
    // "queued" statusMessage write, and the write that clears both lands before the request leaves: a process that takes
    // the task over meanwhile starts it instead of failing it. A call that gets its slot at once writes nothing more.
    let unsent = false
    const running = this.#running.get(task.id)
    const statusMessage = (message: string | null, { from, to } = restatement('working'), resume?: null | { kind: 'unsent' }): Promise<TaskRecord | null> => {
      const write = statusWrites.then(async () => {
        const patch: TaskPatch = { statusMessage: message, by: task.owner, asOwner: task.owner }
        if (resume !== undefined) patch.resume = resume
        const updated = await this.#deps.store.transition(task.id, from, to, patch, Date.now())
        if (updated) events.status(updated)
        // Unless the call began to leave meanwhile (then `unsent` is false already).
        if (updated && resume?.kind === 'unsent' && unsent && running) running.unsent = true
        return updated
      })
      statusWrites = write.then(() => {}, (err: unknown) => this.#deps.log.warn({ err, taskId: task.id }, 'could not record the queue state of a task'))
      return write
    }
    const origin: CallOrigin = {
      client: taskClient(task),
      capabilities: task.clientCapabilities,
      signal,
      ask: (method, params, inputSignal, upstreamRequestId) => run === undefined
        ? inputs.ask(task, method, params, inputSignal, upstreamRequestId)
        : run.inputRound(method, () => inputs.ask(task, method, params, inputSignal, upstreamRequestId)),
      progress: (progress) => events.progress(task, progress),
      notify: (method, params) => {
        if (method === 'notifications/tasks/status') {
          this.#mirror(task, params).catch((err: unknown) => this.#deps.log.warn({ err, taskId: task.id }, 'could not mirror the upstream task status'))
        } else events.notification(task, method, params)
      },
      queued: (limit) => {
        queued = true
        const mark = !sent && task.resume === null
        if (mark) unsent = true
        statusMessage(limit === 'maxConcurrentCalls'
          ? `queued: upstream '${upstream.name}' already runs its maxConcurrentCalls calls`
          : `queued: this principal already runs its maxConcurrentCallsPerPrincipal calls on upstream '${upstream.name}'`, sent ? QUEUED : undefined, mark ? { kind: 'unsent' } : undefined).catch(() => {})
        if (mark && running) running.recording = statusWrites
      },
      sent: async () => {
        sent = true
        if (!queued) return
        if (!unsent) {
          statusMessage(null).catch(() => {})
          return
        }
        // Handed over while it waited (handOver): whoever took it over starts it. Checked and cleared in one turn, so
        // handOver either stopped it before this point or leaves it alone.
        if (controller.signal.aborted) throw controller.signal.reason
        unsent = false
        if (running) running.unsent = false
        // Not sent while the store says unsent (a store that stays unavailable fails it), nor once another process claimed it.
        const cleared = await whileStoreUnavailable(() => statusMessage(null, undefined, null), {
          until: task.ttlMs === null ? undefined : task.createdAt + task.ttlMs,
          signal: this.#deps.shutdown,
        })
        // Refused (null): another process owns the task now (this one was paused past its lease), or it ended.
        if (cleared === null || cleared.owner !== task.owner) {
          controller.abort(new GatewayError('GW_ERR_TASK_HANDED_OVER', ['another gateway process took it over, or it ended, before its call was sent']))
          throw controller.signal.reason
        }
      },
      patient: true,
      authorization,
      trace: run,
      maxResultBytes: this.#deps.maxResultBytes,
    }
    // A task a starting process took over (from an earlier run) runs as the upstream's own task only if the tool
    // requires or allows it: which the upstream's tool list says, once it is read.
    const listing = this.#deps.listing
    if (listing !== undefined) await listing.catch(() => {})
    const plan = upstreamTaskPlan(upstream, task.tool, this.#deps.nativeTaskSupport(task.upstream, task.tool))
    const upstreamTask: UpstreamTaskHooks = {
      resumable: plan.resumable,
      created: async (upstreamTaskId, address) => {
        if (address !== undefined) await record({ kind: 'native', upstreamTaskId, ...address })
      },
      streamed: (resumptionToken, address) => { void record({ kind: 'stream', resumptionToken, ...address }) },
    }
    // Written in order with the status messages; the call goes on whether or not the write succeeds.
    const record = async (resume: TaskResume): Promise<void> => {
      const running = this.#running.get(task.id)
      const write = statusWrites.then(async () => {
        if (await this.#recordResume(task, resume) && running !== undefined) running.resumable = true
      })
      statusWrites = write.catch(() => {})
      if (running !== undefined) running.recording = statusWrites
      await write.catch((err: unknown) => this.#deps.log.warn({ err, taskId: task.id }, 'could not record where the upstream work of a task runs: it cannot be resumed by another process'))
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
    await statusWrites
    return await this.#finish(task, outcome)
  }

  /** What a failed call becomes: the gateway shut down, a resumed upstream task could not be reached, or the upstream's own error. */
  #interrupted (task: TaskRecord, err: unknown): unknown {
    if (this.#deps.shutdown.aborted) return new GatewayError('GW_ERR_SHUTTING_DOWN', [], { cause: err })
    return unreachable(task, err) ?? err
  }

  /** Records where the task's upstream task runs, so that another process can resume it. */
  async #recordResume (task: TaskRecord, resume: TaskResume): Promise<boolean> {
    const { from, to } = restatement('working')
    return await this.#deps.store.transition(task.id, from, to, { resume, by: task.owner, asOwner: task.owner }, Date.now()) !== null
  }

  /** An upstream running the call as its own task reported a new statusMessage: show it on ours. */
  async #mirror (task: TaskRecord, params: JsonObject): Promise<void> {
    if (typeof params.statusMessage !== 'string') return
    const current = await this.#deps.store.get(task.id, Date.now())
    if (!current || isTerminal(current.status) || current.statusMessage === params.statusMessage) return
    const { from, to } = restatement(current.status)
    const change = { statusMessage: params.statusMessage, by: task.owner, asOwner: task.owner }
    const updated = await this.#deps.store.transition(task.id, from, to, change, Date.now())
    if (updated) this.#deps.events.status(updated)
  }

  async #finish (task: TaskRecord, outcome: TaskOutcome): Promise<TaskStatus | undefined> {
    return await finishTask(this.#deps, task, outcome)
  }
}
