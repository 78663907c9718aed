import { toWireError } from '../wire/error-replies.ts'
import { GatewayError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import type { TaskOutcome, TaskRecord } from '../store/types.ts'
import { sourcesOf, type TaskStatus } from '../wire/task-state.ts'
import { moveTask, type TaskMoveDeps } from './task-moves.ts'

/** The text of a CallToolResult, for the statusMessage of a failed task (some clients show only that). */
function errorText (result: JsonObject): string {
  const content = Array.isArray(result.content) ? result.content as JsonObject[] : []
  const text = content.filter((c) => c.type === 'text' && typeof c.text === 'string').map((c) => c.text as string).join(' ')
  return text === '' ? 'the tool reported an error' : text.slice(0, 1000)
}

/** Maps the raw upstream outcome to the 2025-11-25 task status; the raw outcome itself is stored unchanged. */
export function settle (outcome: TaskOutcome): { status: TaskStatus, statusMessage: string | null } {
  if ('error' in outcome) return { status: 'failed', statusMessage: outcome.error.message }
  if (outcome.result.isError === true) return { status: 'failed', statusMessage: errorText(outcome.result) }
  return { status: 'completed', statusMessage: null }
}

/** The outcome, or an error in its place when it is larger than one task may store (tasks.maxResultBytes). */
export function capped (outcome: TaskOutcome, maxResultBytes: number): TaskOutcome {
  const bytes = Buffer.byteLength(JSON.stringify(outcome))
  if (bytes <= maxResultBytes) return outcome
  return { error: toWireError(new GatewayError('GW_ERR_TASK_RESULT_TOO_LARGE', [bytes, maxResultBytes])) }
}

/** A task's last move: to `status`, storing `outcome`. */
export interface Ending {
  status: TaskStatus
  statusMessage: string | null
  outcome: TaskOutcome
}

/**
 * Moves the task to its end, within its principal's budget of stored bytes (limits.storedBytesPerPrincipal,
 * `maxStoredBytes`). An outcome that does not fit (the store refuses the move and changes nothing) fails the
 * task with GW_ERR_STORED_BYTES_LIMIT instead, a move that always fits: the task ends either way. The move
 * is announced (see moveTask). Resolves with the task after the move, or null when the task was no longer in
 * a status it could end from.
 */
export async function storeOutcome (
  moves: TaskMoveDeps,
  task: TaskRecord,
  ending: Ending,
  maxStoredBytes: number | undefined,
  log: Logger,
): Promise<TaskRecord | null> {
  const { status, statusMessage, outcome } = ending
  try {
    const move = { statusMessage, outcome, by: task.owner, asOwner: task.owner, maxStoredBytes }
    return await moveTask(moves, task.id, { from: sourcesOf(status), to: status }, move)
  } catch (err) {
    if (!(err instanceof GatewayError) || err.code !== 'GW_ERR_STORED_BYTES_LIMIT') throw err
    log.warn({ taskId: task.id, principal: task.principal, tool: task.tool, upstream: task.upstream, err: err.message },
      'task outcome over the principal\'s budget of stored bytes (limits.storedBytesPerPrincipal): the task fails instead')
    const failed = { statusMessage: err.message, outcome: { error: toWireError(err) }, by: task.owner, asOwner: task.owner }
    return await moveTask(moves, task.id, { from: sourcesOf('failed'), to: 'failed' }, failed)
  }
}
