/**
 * The task status machine of the MCP tasks spec (2025-11-25, "Task Status"), as data, and the only place the
 * gateway writes its statuses out: services, stores, their SQL and their Lua take every set from here (a
 * unit test fails when another source file restates one). Tasks begin in `working`; `working` and
 * `input_required` may move to each other or end; an ended task never changes.
 */

/** The five statuses of the spec. */
export const TASK_STATUSES = Object.freeze(['working', 'input_required', 'completed', 'failed', 'cancelled'] as const)

export type TaskStatus = typeof TASK_STATUSES[number]

/**
 * For each status, the statuses it may move to: every compare-and-set a store applies is one of these. A
 * running status also moves to itself, a move that changes its statusMessage (queued for a call slot,
 * another input request, a message mirrored from an upstream task) and nothing else; the spec's table lists
 * only the changes of status. A terminal status moves nowhere.
 */
export const TRANSITIONS: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = Object.freeze({
  working: Object.freeze(['working', 'input_required', 'completed', 'failed', 'cancelled'] as const),
  input_required: Object.freeze(['working', 'input_required', 'completed', 'failed', 'cancelled'] as const),
  completed: Object.freeze([]),
  failed: Object.freeze([]),
  cancelled: Object.freeze([]),
})

/** The statuses of an ended task: those the table lets move nowhere. */
export const TERMINAL_STATUSES: readonly TaskStatus[] = Object.freeze(TASK_STATUSES.filter((status) => TRANSITIONS[status].length === 0))

/** The statuses of a task still running (the unfinished ones: recovered, counted against a limit, owned). */
export const RUNNING_STATUSES: readonly TaskStatus[] = Object.freeze(TASK_STATUSES.filter((status) => TRANSITIONS[status].length > 0))

const SOURCES: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = Object.freeze(Object.fromEntries(
  TASK_STATUSES.map((to) => [to, Object.freeze(TASK_STATUSES.filter((from) => TRANSITIONS[from].includes(to)))]),
) as Record<TaskStatus, readonly TaskStatus[]>)

const TERMINAL = new Set<string>(TERMINAL_STATUSES)

export function isTerminal (status: TaskStatus): boolean {
  return TERMINAL.has(status)
}

export function canTransition (from: TaskStatus, to: TaskStatus): boolean {
  return TRANSITIONS[from].includes(to)
}

/** The statuses from which `to` may be reached: the `from` list of a compare-and-set to `to`. */
export function sourcesOf (to: TaskStatus): readonly TaskStatus[] {
  return SOURCES[to]
}

/** A compare-and-set a service asks of the store: to `to`, if the task's status is one of `from`. */
export interface TaskMove {
  readonly from: readonly TaskStatus[]
  readonly to: TaskStatus
}

function move (from: readonly TaskStatus[], to: TaskStatus): TaskMove {
  const outside = from.filter((status) => !canTransition(status, to))
  if (outside.length > 0) throw new Error(`${outside.join(', ')} → ${to} is not a move of the task status table`)
  return Object.freeze({ from: Object.freeze([...from]), to })
}

/**
 * Every input request is settled: a task waiting for input works again. Narrower than `sourcesOf('working')`:
 * a task already working keeps its statusMessage (the input settled after something else moved it on).
 */
export const RESUME: TaskMove = move(['input_required'], 'working')

/**
 * A task whose call waits for a call slot again once the input it waited for is answered: working, with the queue
 * as its statusMessage, whether or not the answer's own move (RESUME) has landed yet.
 */
export const QUEUED: TaskMove = move(['working', 'input_required'], 'working')

const RESTATEMENTS = Object.freeze(Object.fromEntries(
  RUNNING_STATUSES.map((status) => [status, move([status], status)]),
)) as Readonly<Partial<Record<TaskStatus, TaskMove>>>

/** The self-move of a running status: a new statusMessage while the task stays exactly where it is. */
export function restatement (status: TaskStatus): TaskMove {
  const self = RESTATEMENTS[status]
  if (self === undefined) throw new Error(`a task that is ${status} never changes`)
  return self
}
