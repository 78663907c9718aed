import type { InputRecord, TaskEvent, TaskPatch, TaskRecord } from './types.ts'
import type { TaskStatus } from '../wire/task-state.ts'

/**
 * The entries of a task's timeline, built the same way for every backend: each store writes the entry in the
 * same step as the change it records and keeps only the newest TIMELINE_LIMIT of a task.
 */

/** Entries kept per task: a task with more (many input rounds, many status messages) loses its oldest ones. */
export const TIMELINE_LIMIT = 100

export function createdEvent (task: Pick<TaskRecord, 'createdAt' | 'owner'>): TaskEvent {
  return { type: 'created', at: task.createdAt, process: task.owner }
}

/**
 * The entry of a move to `to`. `outcomeJson` is the stored outcome as JSON when the move stores one (the
 * stores serialise it anyway): its size in bytes is the result size an operator sees.
 */
export function statusEvent (to: TaskStatus, patch: TaskPatch, now: number, outcomeJson: string | undefined): TaskEvent {
  return {
    type: 'status',
    at: now,
    status: to,
    ...(patch.statusMessage !== undefined && { statusMessage: patch.statusMessage }),
    ...(patch.by !== undefined && { process: patch.by }),
    ...(outcomeJson !== undefined && { resultBytes: Buffer.byteLength(outcomeJson, 'utf8') }),
    ...(patch.resume?.kind === 'native' && { upstreamTask: patch.resume.upstreamTaskId }),
    ...(patch.resume?.kind === 'stream' && { replayable: true as const }),
  }
}

export function inputEvent (input: InputRecord): TaskEvent {
  return { type: 'input', at: input.createdAt, key: input.key, method: input.method }
}

export function settledEvent (key: string, state: 'answered' | 'expired', now: number): TaskEvent {
  return { type: 'input_settled', at: now, key, state }
}

export function claimedEvent (from: string, to: string, now: number): TaskEvent {
  return { type: 'claimed', at: now, process: to, from }
}
