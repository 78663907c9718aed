import { GatewayError } from '../errors.ts'
import type { TaskOutcome, TaskRecord } from '../store/types.ts'
import { restatement, type TaskStatus } from '../wire/task-state.ts'
import { toWireError } from '../wire/error-replies.ts'
import { isStoreUnavailable, whileStoreUnavailable, type StoreRetryOptions } from './store-retry.ts'
import { capped, settle, storeOutcome, type Ending } from './task-outcome.ts'
import { moveTask } from './task-moves.ts'
import type { TaskRunnerDeps } from './task-runner.ts'

/** What storing a task's outcome needs of the runner's dependencies. */
export type TaskFinishDeps = Pick<TaskRunnerDeps, 'store' | 'log' | 'shutdown' | 'inputs' | 'events' | 'bus' | 'maxResultBytes' | 'storedBytesPerPrincipal'>

/** The last stretch of a task's TTL kept for storing a small failure in place of an outcome that could not be stored. */
const FAILURE_MARGIN_MS = 60_000
/** Refusals of the outcome, each right after a small write was accepted, that say it is refused for its size. */
const SIZE_REFUSALS = 5

/** The outcome was refused while smaller writes were accepted: a refusal for its size, which waiting does not end. */
class RefusedForSize extends Error {
  constructor (readonly refusal: GatewayError) {
    super(refusal.message, { cause: refusal })
  }
}

/**
 * Stores the outcome. While the store is unavailable or refuses writes, the write is retried (backoff up to
 * 5 s). When the outcome still cannot be stored (refused for its size while smaller writes are accepted, the
 * task's TTL near, or the gateway shutting down), a small failure is stored instead (GW_ERR_TASK_OUTCOME_NOT_STORED,
 * naming the store and why), retried until the TTL (once at shutdown): the client learns what happened rather
 * than finding the task stuck working or "restarted". Only when even that cannot be stored is the outcome
 * logged as lost. The retry drops the outcome if another process took the task over meanwhile (this one was
 * cut off long enough for its lease to lapse). An outcome whose task the store no longer holds is logged.
 */
export async function finishTask (deps: TaskFinishDeps, task: TaskRecord, upstreamOutcome: TaskOutcome): Promise<TaskStatus | undefined> {
  const { store, log } = deps
  const outcome = capped(upstreamOutcome, deps.maxResultBytes)
  if (outcome !== upstreamOutcome) log.warn({ taskId: task.id, tool: task.tool, upstream: task.upstream, maxResultBytes: deps.maxResultBytes }, 'task result over tasks.maxResultBytes: the task fails instead')
  const { status, statusMessage } = settle(outcome)
  const about = { taskId: task.id, principal: task.principal, status, tool: task.tool, upstream: task.upstream }
  const ttlEnd = task.ttlMs === null ? undefined : task.createdAt + task.ttlMs
  let retries = 0
  const retry: StoreRetryOptions = {
    // The last stretch of the TTL is kept for the small failure.
    until: ttlEnd === undefined ? undefined : ttlEnd - Math.min(FAILURE_MARGIN_MS, task.ttlMs! / 10),
    signal: deps.shutdown,
    onRetry: (err, attempt) => {
      retries = attempt
      if (attempt === 1) log.warn({ ...about, err }, 'could not store the outcome of a task; retrying until the store is back')
    },
  }
  let sizeRefusals = 0
  /** Whether the store accepts a small write now: the task's statusMessage says its outcome waits to be stored. */
  const acceptsSmallWrite = async (refusal: GatewayError): Promise<boolean> => {
    const waiting = { statusMessage: `the outcome is waiting to be stored (${refusal.message}); retrying`, by: task.owner }
    // Refused too: the store refuses every write, and the retry goes on as for the outcome.
    return await moveTask(deps, task.id, restatement('working'), waiting).catch(() => null) !== null
  }
  let updated: TaskRecord | null | undefined
  try {
    updated = await whileStoreUnavailable(async () => {
      if (retries > 0) {
        const current = await store.get(task.id, Date.now())
        if (current !== null && current.owner !== task.owner) return null
      }
      try {
        return await storeOutcome(deps, task, { status, statusMessage, outcome }, deps.storedBytesPerPrincipal, log)
      } catch (err) {
        if (!isStoreUnavailable(err)) throw err
        sizeRefusals = await acceptsSmallWrite(err) ? sizeRefusals + 1 : 0
        throw sizeRefusals >= SIZE_REFUSALS ? new RefusedForSize(err) : err
      }
    }, retry)
  } catch (err) {
    if (!isStoreUnavailable(err) && !(err instanceof RefusedForSize)) throw err
    updated = await storeFailure(deps, task, ttlEnd, failureReason(err, deps.shutdown.aborted))
    if (updated === undefined) {
      log.error({ ...about, err, attempts: retries + 1 }, deps.shutdown.aborted
        ? 'lost the outcome of a task: the store was still unavailable when the gateway shut down'
        : 'lost the outcome of a task: the store stayed unavailable until the task\'s TTL passed')
      return undefined
    }
    log.error({ ...about, err, statusMessage: updated?.statusMessage }, 'could not store the outcome of a task: it failed with a message naming the store instead')
  }
  if (retries > 0) {
    log.info({ ...about, attempts: retries + 1 }, updated
      ? 'the store is back: stored the outcome of a task that ended while it was unavailable'
      : 'the store is back: dropped the outcome of a task that ended while it was unavailable (already terminal, or taken over by another process)')
  }
  if (updated === null && await store.get(task.id, Date.now()).then((current) => current === null, () => false)) {
    log.error(about, 'the outcome of a task arrived but the store no longer holds the task (the store lost it, or its TTL passed): the outcome is dropped')
  }
  await whileStoreUnavailable(() => deps.inputs.expireAll(task.id, new GatewayError('GW_ERR_REQUEST_CANCELLED', ['the task ended before the client answered'])), { until: ttlEnd, signal: deps.shutdown })
    .catch((err: unknown) => log.warn({ ...about, err }, 'could not expire the unanswered input requests of a finished task'))
  if (updated) log.info({ ...about, audit: 'task.finished' }, 'task finished')
  return updated?.status
}

/** Why the outcome could not be stored, for the statusMessage of the failure stored instead. */
function failureReason (err: GatewayError | RefusedForSize, shuttingDown: boolean): string {
  if (err instanceof RefusedForSize) return `${err.refusal.message}; it was refused for its size while smaller writes were accepted`
  return `${err.message}; ${shuttingDown ? 'still so when the gateway shut down' : 'still so as the task\'s TTL came near'}`
}

/**
 * Fails the task with GW_ERR_TASK_OUTCOME_NOT_STORED, retried while the store is unavailable until the TTL
 * (once when the gateway is shutting down). Resolves with the task after the move (null: no longer running),
 * or undefined when even this could not be stored.
 */
async function storeFailure (
  deps: TaskFinishDeps,
  task: TaskRecord,
  until: number | undefined,
  why: string,
): Promise<TaskRecord | null | undefined> {
  const error = new GatewayError('GW_ERR_TASK_OUTCOME_NOT_STORED', [why])
  const ending: Ending = { status: 'failed', statusMessage: error.message, outcome: { error: toWireError(error) } }
  try {
    return await whileStoreUnavailable(() => storeOutcome(deps, task, ending, undefined, deps.log), { until, signal: deps.shutdown })
  } catch (err) {
    if (isStoreUnavailable(err)) return undefined
    throw err
  }
}
