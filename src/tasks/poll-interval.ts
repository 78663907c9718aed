import type { TaskRecord } from '../store/types.ts'
import { isTerminal } from '../wire/task-state.ts'

/** The share of its age a running task's suggested poll interval grows to (a task running for 60 s: polled every 6 s). */
export const POLL_AGE_SHARE = 0.1
/** Grown intervals are whole seconds, so that the answers about a task change rarely. */
const STEP_MS = 1000

/**
 * The poll interval the gateway suggests for a task at `now` (the Task's `pollInterval`/`pollIntervalMs`): the
 * interval it was created with (tasks.pollInterval) while it is young; once a tenth of its age is longer, that
 * tenth in whole seconds, up to `maxMs` (tasks.pollIntervalMax). A task that has run long will most likely run
 * on, so its clients poll it less often, and the polls of many long tasks cost the gateway less. A terminal task
 * keeps the interval it has. A `maxMs` at or below the task's interval keeps the interval fixed.
 */
export function suggestedPollInterval (task: Pick<TaskRecord, 'createdAt' | 'pollIntervalMs' | 'status'>, now: number, maxMs: number): number {
  const base = task.pollIntervalMs
  if (maxMs <= base || isTerminal(task.status)) return base
  const grown = Math.floor((now - task.createdAt) * POLL_AGE_SHARE / STEP_MS) * STEP_MS
  return grown <= base ? base : Math.min(grown, maxMs)
}

/**
 * The last record shown with a grown interval, by the frozen stored record it was made from (the memory store's,
 * the SQLite store's recent records): a task polled many times between two steps of its interval is shown the
 * same frozen record, whose dates are written once (see taskTimes), instead of a new copy per poll.
 */
const grownOf = new WeakMap<TaskRecord, TaskRecord>()

/** The task as its clients are shown it at `now`: with its suggested poll interval (the same record when that is unchanged). */
export function withSuggestedPollInterval (task: TaskRecord, now: number, maxMs: number): TaskRecord {
  const pollIntervalMs = suggestedPollInterval(task, now, maxMs)
  if (pollIntervalMs === task.pollIntervalMs) return task
  const known = grownOf.get(task)
  if (known !== undefined && known.pollIntervalMs === pollIntervalMs) return known
  const grown = { ...task, pollIntervalMs }
  if (!Object.isFrozen(task)) return grown
  grownOf.set(task, Object.freeze(grown))
  return grown
}
