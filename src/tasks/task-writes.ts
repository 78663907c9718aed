import { GatewayError } from '../errors.ts'
import type { TaskPatch, TaskRecord, TaskResume } from '../store/types.ts'
import type { UpstreamTaskStatus } from '../upstream/inflight-call.ts'
import { QUEUED, isTerminal, restatement } from '../wire/task-state.ts'
import { whileStoreUnavailable } from './store-retry.ts'
import { moveTask } from './task-moves.ts'
import { settled } from '../observability/ignored.ts'
import type { TaskRunnerDeps } from './task-runner.ts'

/** A task whose upstream call runs in this process. */
export interface RunningTask {
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

type WriteDeps = Pick<TaskRunnerDeps, 'store' | 'events' | 'bus' | 'log' | 'shutdown'>

/**
 * Records where the task's upstream work runs (TaskRecord.resume), as its owner, so that another process can resume
 * it. A move like any other (its lastUpdatedAt changes): announced with the task as it stands.
 */
export async function recordResume (deps: WriteDeps, task: TaskRecord, resume: TaskResume): Promise<boolean> {
  return await moveTask(deps, task.id, restatement('working'), { resume, by: task.owner, asOwner: task.owner }) !== null
}

/** An upstream running the call as its own task reported a new statusMessage: show it on ours. */
export async function mirrorStatus (deps: WriteDeps, task: TaskRecord, upstream: UpstreamTaskStatus): Promise<void> {
  const { statusMessage } = upstream
  if (statusMessage === undefined) return
  const current = await deps.store.get(task.id, Date.now())
  if (!current || isTerminal(current.status) || current.statusMessage === statusMessage) return
  await moveTask(deps, task.id, restatement(current.status), { statusMessage, by: task.owner, asOwner: task.owner })
}

/**
 * The writes a running task's call makes about itself while it runs, in order: its queue state (a "queued"
 * write never lands after the one that clears it), its unsent mark and where its upstream work runs. Each is
 * made as the task's owner, so none lands once another process took the task over.
 *
 * A call that waits for a slot before it is first sent (not a resumed one) is marked unsent (TaskRecord.resume)
 * by its "queued" statusMessage write, and the write that clears both lands before the request leaves: a process
 * that takes the task over meanwhile starts it instead of failing it. A call that gets its slot at once writes
 * nothing more.
 */
export class TaskWrites {
  readonly #deps: WriteDeps
  readonly #task: TaskRecord
  readonly #running: RunningTask | undefined
  readonly #controller: AbortController
  #chain = Promise.resolve()
  #queued = false
  /** Once sent, the call waits for a slot again only when its input was answered: the task may still show input_required. */
  #sent = false
  #unsent = false

  constructor (deps: WriteDeps, task: TaskRecord, running: RunningTask | undefined, controller: AbortController) {
    this.#deps = deps
    this.#task = task
    this.#running = running
    this.#controller = controller
  }

  /** Resolves once every write made so far has landed or failed. */
  get settled (): Promise<void> {
    return this.#chain
  }

  /** The call waits for a slot of `limit` on upstream `upstream`. */
  queued (limit: 'maxConcurrentCalls' | 'maxConcurrentCallsPerPrincipal', upstream: string): void {
    this.#queued = true
    const mark = !this.#sent && this.#task.resume === null
    if (mark) this.#unsent = true
    const write = this.#statusMessage(limit === 'maxConcurrentCalls'
      ? `queued: upstream '${upstream}' already runs its maxConcurrentCalls calls`
      : `queued: this principal already runs its maxConcurrentCallsPerPrincipal calls on upstream '${upstream}'`, this.#sent ? QUEUED : undefined, mark ? { kind: 'unsent' } : undefined)
    // A write that fails is logged by the chain (see #statusMessage).
    void settled(write)
    if (mark && this.#running) this.#running.recording = this.#chain
  }

  /** The call is about to leave: clears its queue state; throws when the task is no longer this process's to send. */
  async sent (): Promise<void> {
    this.#sent = true
    if (!this.#queued) return
    if (!this.#unsent) {
      // A write that fails is logged by the chain (see #statusMessage).
      void settled(this.#statusMessage(null))
      return
    }
    const controller = this.#controller
    // Handed over while it waited (TaskRunner.handOver): whoever took it over starts it. Checked and cleared in one
    // turn, so handOver either stopped it before this point or leaves it alone.
    if (controller.signal.aborted) throw controller.signal.reason
    this.#unsent = false
    if (this.#running) this.#running.unsent = false
    const task = this.#task
    // Not sent while the store says unsent (a store that stays unavailable fails it), nor once another process claimed it.
    const cleared = await whileStoreUnavailable(() => this.#statusMessage(null, undefined, null), {
      until: task.ttlMs === null ? undefined : task.createdAt + task.ttlMs,
      signal: this.#deps.shutdown,
    })
    // Refused (null): another process owns the task now (this one was paused past its lease), or it ended.
    if (cleared === null || cleared.owner !== task.owner) {
      controller.abort(new GatewayError('GW_ERR_TASK_HANDED_OVER', ['another gateway process took it over, or it ended, before its call was sent']))
      throw controller.signal.reason
    }
  }

  /** Records where the upstream work runs, in order with the status messages; the call goes on whether or not it lands. */
  async record (resume: TaskResume): Promise<void> {
    const running = this.#running
    const write = this.#chain.then(async () => {
      if (await recordResume(this.#deps, this.#task, resume) && running !== undefined) running.resumable = true
    })
    // The next write waits for this one either way; this one's failure is logged below.
    this.#chain = settled(write)
    if (running !== undefined) running.recording = this.#chain
    await write.catch((err: unknown) => this.#deps.log.warn({ err, taskId: this.#task.id }, 'could not record where the upstream work of a task runs: it cannot be resumed by another process'))
  }

  #statusMessage (message: string | null, move = restatement('working'), resume?: null | { kind: 'unsent' }): Promise<TaskRecord | null> {
    const task = this.#task
    const write = this.#chain.then(async () => {
      const patch: TaskPatch = { statusMessage: message, by: task.owner, asOwner: task.owner }
      if (resume !== undefined) patch.resume = resume
      const updated = await moveTask(this.#deps, task.id, move, patch)
      // Unless the call began to leave meanwhile (then `unsent` is false already).
      if (updated && resume?.kind === 'unsent' && this.#unsent && this.#running) this.#running.unsent = true
      return updated
    })
    this.#chain = write.then(() => {}, (err: unknown) => this.#deps.log.warn({ err, taskId: task.id }, 'could not record the queue state of a task'))
    return write
  }
}
