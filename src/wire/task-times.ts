/** What a task record says of its times (epoch milliseconds). */
export interface TimedTask {
  readonly createdAt: number
  readonly lastUpdatedAt: number
}

/** A task's two timestamps as the wire writes them (ISO 8601, UTC). */
export interface TaskTimes {
  readonly createdAt: string
  readonly lastUpdatedAt: string
}

/**
 * The times of the frozen records the stores hand out again and again (the memory store, the SQLite store's
 * recent records): a task polled many times between two of its changes has its dates written once. A changed
 * task is a new record, so the strings never outlive the state they show.
 */
const known = new WeakMap<TimedTask, TaskTimes>()

/**
 * Recent instants as written (a Date and its ISO string cost more than the rest of a tasks/get answer): the stores
 * that hand out a new record per read (Redis, PostgreSQL) show the same few instants again and again. Emptied when
 * full, so it holds at most ISO_CACHE_SIZE strings.
 */
const isoOf = new Map<number, string>()
const ISO_CACHE_SIZE = 4096

function iso (ms: number): string {
  let text = isoOf.get(ms)
  if (text === undefined) {
    if (isoOf.size >= ISO_CACHE_SIZE) isoOf.clear()
    text = new Date(ms).toISOString()
    isoOf.set(ms, text)
  }
  return text
}

export function taskTimes (task: TimedTask): TaskTimes {
  const cached = known.get(task)
  if (cached !== undefined) return cached
  const times = { createdAt: iso(task.createdAt), lastUpdatedAt: iso(task.lastUpdatedAt) }
  if (Object.isFrozen(task)) known.set(task, times)
  return times
}
