import { RpcError } from '../../errors.ts'
import type { InputRecord, TaskRecord } from '../../store/types.ts'
import type { JsonObject, RpcRequest } from '../../wire/jsonrpc.ts'
import { taskTimes } from '../../wire/task-times.ts'

/** How the 2025-11-25 dialect writes tasks on the wire (spec-tasks §2, §4.1). */

export const RELATED_TASK = 'io.modelcontextprotocol/related-task'
export const IMMEDIATE_RESPONSE = 'io.modelcontextprotocol/model-immediate-response'

export function relatedTaskMeta (taskId: string): JsonObject {
  return { [RELATED_TASK]: { taskId } }
}

/** The flat 2025-11-25 `Task` object. */
export function renderTask (task: TaskRecord): JsonObject {
  const times = taskTimes(task)
  const wire: JsonObject = {
    taskId: task.id,
    status: task.status,
    createdAt: times.createdAt,
    lastUpdatedAt: times.lastUpdatedAt,
    ttl: task.ttlMs,
    pollInterval: task.pollIntervalMs,
  }
  if (task.statusMessage !== null) wire.statusMessage = task.statusMessage
  return wire
}

export function renderCreateTaskResult (task: TaskRecord, toolName: string): JsonObject {
  return {
    task: renderTask(task),
    _meta: {
      [IMMEDIATE_RESPONSE]: `The tool '${toolName}' is running as task ${task.id}; its result will be available when the task completes.`,
    },
  }
}

/** What `tasks/result` answers for a terminal task: exactly the upstream's outcome, result or JSON-RPC error. */
export function renderOutcome (task: TaskRecord): JsonObject {
  const outcome = task.outcome
  if (outcome === null) throw new RpcError(-32603, `task ${task.id} ended (${task.status}) without a result: ${task.statusMessage ?? 'no details'}`)
  if ('error' in outcome) throw new RpcError(outcome.error.code, outcome.error.message, outcome.error.data)
  const meta = (outcome.result._meta ?? {}) as JsonObject
  return { ...outcome.result, _meta: { ...meta, ...relatedTaskMeta(task.id) } }
}

/** A queued input as the JSON-RPC request the client receives (same id on every delivery). */
export function renderInputRequest (input: InputRecord): RpcRequest {
  const meta = (input.params._meta ?? {}) as JsonObject
  return {
    jsonrpc: '2.0',
    id: input.key,
    method: input.method,
    params: { ...input.params, _meta: { ...meta, ...relatedTaskMeta(input.taskId) } },
  }
}

export function encodeTaskCursor (createdAt: number, id: string): string {
  return Buffer.from(JSON.stringify([createdAt, id])).toString('base64url')
}

export function decodeTaskCursor (cursor: string): { createdAt: number, id: string } | undefined {
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown
    if (Array.isArray(value) && typeof value[0] === 'number' && typeof value[1] === 'string') return { createdAt: value[0], id: value[1] }
  } catch {
    // Not a cursor this gateway wrote: undefined, which the caller refuses.
  }
  return undefined
}
