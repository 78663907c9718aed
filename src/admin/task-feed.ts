import { BUS, publishOn, subscribeTo, type PayloadOf } from '../store/bus-channels.ts'
import type { SignalBus, TaskRecord } from '../store/types.ts'
import type { TaskEvents } from '../tasks/task-events.ts'
import { summarize, type AdminTaskSummary } from './task-view.ts'

/** What changed: the task was created, moved (status or statusMessage), or an input request was queued or settled. */
export type TaskChange = 'created' | 'status' | 'input' | 'input_settled'

/** One message of the feed: the task as the admin API lists it, after the change. */
export interface TaskFeedMessage {
  change: TaskChange
  task: AdminTaskSummary
}

/**
 * `events` that also announce each task change on the store's bus, for the admin event streams of every
 * process sharing the store. The announcement is not awaited (signals are at most once; a dashboard that
 * misses one reads the task again on the next), so the task's own path does not wait for it.
 */
export function announceTaskChanges (events: TaskEvents, bus: SignalBus): TaskEvents {
  const announce = (change: TaskChange, task: TaskRecord): void => {
    const message: TaskFeedMessage = { change, task: summarize(task) }
    void publishOn(bus, BUS.adminTasks, undefined, message as unknown as PayloadOf<typeof BUS.adminTasks>).catch(() => {})
  }
  return {
    created: (task) => {
      events.created?.(task)
      announce('created', task)
    },
    status: (task) => {
      events.status(task)
      announce('status', task)
    },
    input: (task, input) => {
      events.input(task, input)
      announce('input', task)
    },
    inputSettled: (task, key) => {
      events.inputSettled(task, key)
      announce('input_settled', task)
    },
    progress: (task, progress) => events.progress(task, progress),
    notification: (task, method, params) => events.notification(task, method, params),
  }
}

/** Hears the task feed of every process sharing the store; returns the function that stops it. */
export function watchTaskFeed (bus: SignalBus, listener: (message: TaskFeedMessage) => void): () => void {
  return subscribeTo(bus, BUS.adminTasks, undefined, (message) => listener(message as unknown as TaskFeedMessage))
}
