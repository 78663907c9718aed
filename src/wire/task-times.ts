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

export function taskTimes (task: TimedTask): TaskTimes {
  const cached = known.get(task)
  if (cached !== undefined) return cached
  const times = { createdAt: new Date(task.createdAt).toISOString(), lastUpdatedAt: new Date(task.lastUpdatedAt).toISOString() }
  if (Object.isFrozen(task)) known.set(task, times)
  return times
}
