import { BUS, publishOn, subscribeTo, type PayloadOf } from '../store/bus-channels.ts'
import type { SignalBus, TaskRecord } from '../store/types.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import type { TaskEvents } from '../tasks/task-events.ts'
import { summarize, type AdminTaskSummary } from './task-view.ts'
import { ignoreWithTrace } from '../observability/ignored.ts'
import type { Logger } from '../observability/logger.ts'

/**
 * What changed: the task was created, moved (status or statusMessage), an input request was queued or settled,
 * or the upstream reported progress on its call.
 */
export type TaskChange = 'created' | 'status' | 'input' | 'input_settled' | 'progress'

/** The last progress an upstream reported on a task's call (its notifications/progress), and when it came. */
export interface TaskProgress {
  progress: number
  total?: number
  message?: string
  /** ISO 8601 time. */
  at: string
}

/** One message of the feed: the task as the admin API lists it, after the change. */
export interface TaskFeedMessage {
  change: TaskChange
  task: AdminTaskSummary
  /** With `progress` messages. */
  progress?: TaskProgress
}

/** A task's progress is announced at most this often: an upstream may report thousands of steps a second. */
export const PROGRESS_EVERY_MS = 250

function progressOf (params: JsonObject): TaskProgress | undefined {
  if (typeof params.progress !== 'number') return undefined
  return {
    progress: params.progress,
    ...(typeof params.total === 'number' && { total: params.total }),
    ...(typeof params.message === 'string' && { message: params.message.slice(0, 200) }),
    at: new Date().toISOString(),
  }
}

/**
 * `events` that also announce each task change on the store's bus, for the admin event streams of every
 * process sharing the store. The announcement is not awaited (signals are at most once; a dashboard that
 * misses one reads the task again on the next), so the task's own path does not wait for it.
 */
export function announceTaskChanges (events: TaskEvents, bus: SignalBus, log: Logger): TaskEvents {
  const missed = ignoreWithTrace(log, 'a task change was not announced to the dashboards; they read the task again on its next change')
  /** When each running task's progress was last announced (forgotten when the task moves). */
  const progressed = new Map<string, number>()
  const announce = (change: TaskChange, task: TaskRecord, progress?: TaskProgress): void => {
    const message: TaskFeedMessage = { change, task: summarize(task), ...(progress && { progress }) }
    publishOn(bus, BUS.adminTasks, undefined, message as unknown as PayloadOf<typeof BUS.adminTasks>).catch(missed)
  }
  return {
    created: (task) => {
      events.created?.(task)
      announce('created', task)
    },
    status: (task) => {
      events.status(task)
      progressed.delete(task.id)
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
    progress: (task, params) => {
      events.progress(task, params)
      const now = Date.now()
      const progress = progressOf(params)
      if (progress === undefined || now - (progressed.get(task.id) ?? 0) < PROGRESS_EVERY_MS) return
      progressed.set(task.id, now)
      announce('progress', task, progress)
    },
    notification: (task, method, params) => events.notification(task, method, params),
  }
}

/** Hears the task feed of every process sharing the store; returns the function that stops it. */
export function watchTaskFeed (bus: SignalBus, listener: (message: TaskFeedMessage) => void): () => void {
  return subscribeTo(bus, BUS.adminTasks, undefined, (message) => listener(message as unknown as TaskFeedMessage))
}
