/**
 * The task status machine of the MCP tasks spec (2025-11-25, "Task Status"), as data. Tasks begin in
 * `working`; `working` and `input_required` may move to each other or end; an ended task never changes.
 * Stores apply a move with a compare-and-set whose `from` list is `sourcesOf(to)`.
 */

export const TASK_STATUSES = Object.freeze(['working', 'input_required', 'completed', 'failed', 'cancelled'] as const)

export type TaskStatus = typeof TASK_STATUSES[number]

export const TERMINAL_STATUSES: readonly TaskStatus[] = Object.freeze(['completed', 'failed', 'cancelled'])

/** For each status, the statuses it may move to. */
export const TRANSITIONS: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = Object.freeze({
  working: Object.freeze(['input_required', 'completed', 'failed', 'cancelled'] as const),
  input_required: Object.freeze(['working', 'completed', 'failed', 'cancelled'] as const),
  completed: Object.freeze([]),
  failed: Object.freeze([]),
  cancelled: Object.freeze([]),
})

const SOURCES: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = Object.freeze(Object.fromEntries(
  TASK_STATUSES.map((to) => [to, Object.freeze(TASK_STATUSES.filter((from) => TRANSITIONS[from].includes(to)))]),
) as Record<TaskStatus, readonly TaskStatus[]>)

export function isTerminal (status: TaskStatus): boolean {
  return TERMINAL_STATUSES.includes(status)
}

export function canTransition (from: TaskStatus, to: TaskStatus): boolean {
  return TRANSITIONS[from].includes(to)
}

/** The statuses from which `to` may be reached: the `from` list of a compare-and-set to `to`. */
export function sourcesOf (to: TaskStatus): readonly TaskStatus[] {
  return SOURCES[to]
}
