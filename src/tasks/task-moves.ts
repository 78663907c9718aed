import { BUS, publishOn } from '../store/bus-channels.ts'
import type { SignalBus, TaskPatch, TaskRecord, TaskStore } from '../store/types.ts'
import type { TaskMove } from '../wire/task-state.ts'
import { ignoreWithTrace } from '../observability/ignored.ts'
import type { Logger } from '../observability/logger.ts'
import type { TaskEvents } from './task-events.ts'

/** What moving a task needs: the store that holds it, and whom its moves are told to. */
export interface TaskMoveDeps {
  readonly store: TaskStore
  readonly events: TaskEvents
  readonly bus: SignalBus
  /** Where a wake-up the bus would not take is traced (waiters read the task again on their own). */
  readonly log: Logger
}

/**
 * Moves a task: the store's compare-and-set from `move.from` to `move.to` with `patch`, and, when it wins, its
 * announcement (see announceStatus). The only place a task's record moves (a unit test keeps it so): a move
 * nobody hears of leaves a waiting `tasks/result` or `subscriptions/listen` asleep. Resolves with the task after
 * the move, or null when the task was not in a status of `move.from` (or belongs to another owner than
 * `patch.asOwner`); rejects only when the store does.
 */
export async function moveTask (
  deps: TaskMoveDeps,
  id: string,
  move: TaskMove,
  patch: TaskPatch,
  now: number = Date.now(),
): Promise<TaskRecord | null> {
  const moved = await deps.store.transition(id, move.from, move.to, patch, now)
  if (moved !== null) announceStatus(deps, moved)
  return moved
}

/**
 * Tells everyone watching that the task now stands as `task` says: the task events (the 2025-11-25 status
 * notification of its session, the admin feed) and the wake-up on the bus that every era's waiters hear, in
 * whichever process they wait. The wake-up is a signal (at most once, not awaited): a waiter that misses one
 * reads the task again on its own.
 */
export function announceStatus (deps: Pick<TaskMoveDeps, 'events' | 'bus' | 'log'>, task: TaskRecord): void {
  deps.events.status(task)
  publishOn(deps.bus, BUS.task, task.id, { type: 'status', status: task.status })
    .catch(ignoreWithTrace(deps.log, 'a task status wake-up was not sent; waiters read the task again on their own', { taskId: task.id }))
}
