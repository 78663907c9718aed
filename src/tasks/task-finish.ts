import { GatewayError } from '../errors.ts'
import type { TaskOutcome, TaskRecord } from '../store/types.ts'
import type { TaskStatus } from '../wire/task-state.ts'
import { isStoreUnavailable, whileStoreUnavailable, type StoreRetryOptions } from './store-retry.ts'
import { capped, settle, storeOutcome } from './task-outcome.ts'
import type { TaskRunnerDeps } from './task-runner.ts'

/** What storing a task's outcome needs of the runner's dependencies. */
export type TaskFinishDeps = Pick<TaskRunnerDeps, 'store' | 'log' | 'shutdown' | 'inputs' | 'events' | 'maxResultBytes' | 'storedBytesPerPrincipal'>

/**
 * Stores the outcome. While the store is unavailable the write is retried (backoff up to 5 s) until
 * it is back, the task's TTL passes or the gateway shuts down, so an outcome that arrives during an
 * outage is kept; one that cannot be stored in time is logged as lost, never dropped silently. The
 * retry drops the outcome if another process took the task over meanwhile (this one was cut off long
 * enough for its lease to lapse). An outcome whose task the store no longer holds is logged as an error.
 */
export async function finishTask (deps: TaskFinishDeps, task: TaskRecord, upstreamOutcome: TaskOutcome): Promise<TaskStatus | undefined> {
  const { store, log } = deps
  const outcome = capped(upstreamOutcome, deps.maxResultBytes)
  if (outcome !== upstreamOutcome) log.warn({ taskId: task.id, tool: task.tool, upstream: task.upstream, maxResultBytes: deps.maxResultBytes }, 'task result over tasks.maxResultBytes: the task fails instead')
  const { status, statusMessage } = settle(outcome)
  const about = { taskId: task.id, principal: task.principal, status, tool: task.tool, upstream: task.upstream }
  let retries = 0
  const retry: StoreRetryOptions = {
    until: task.ttlMs === null ? undefined : task.createdAt + task.ttlMs,
    signal: deps.shutdown,
    onRetry: (err, attempt) => {
      retries = attempt
      if (attempt === 1) log.warn({ ...about, err }, 'could not store the outcome of a task; retrying until the store is back')
    },
  }
  let updated: TaskRecord | null
  try {
    updated = await whileStoreUnavailable(async () => {
      if (retries > 0) {
        const current = await store.get(task.id, Date.now())
        if (current !== null && current.owner !== task.owner) return null
      }
      return await storeOutcome(store, task, { status, statusMessage, outcome }, deps.storedBytesPerPrincipal, log)
    }, retry)
  } catch (err) {
    if (!isStoreUnavailable(err)) throw err
    log.error({ ...about, err, attempts: retries + 1 }, deps.shutdown.aborted
      ? 'lost the outcome of a task: the store was still unavailable when the gateway shut down'
      : 'lost the outcome of a task: the store stayed unavailable until the task\'s TTL passed')
    return undefined
  }
  if (retries > 0) {
    log.info({ ...about, attempts: retries + 1 }, updated
      ? 'the store is back: stored the outcome of a task that ended while it was unavailable'
      : 'the store is back: dropped the outcome of a task that ended while it was unavailable (already terminal, or taken over by another process)')
  }
  if (updated === null && await store.get(task.id, Date.now()).then((current) => current === null, () => false)) {
    log.error(about, 'the outcome of a task arrived but the store no longer holds the task (the store lost it, or its TTL passed): the outcome is dropped')
  }
  await whileStoreUnavailable(() => deps.inputs.expireAll(task.id, new GatewayError('GW_ERR_REQUEST_CANCELLED', ['the task ended before the client answered'])), { until: retry.until, signal: retry.signal })
    .catch((err: unknown) => log.warn({ ...about, err }, 'could not expire the unanswered input requests of a finished task'))
  if (updated) {
    log.info({ ...about, audit: 'task.finished' }, 'task finished')
    deps.events.status(updated)
  }
  return updated?.status
}
