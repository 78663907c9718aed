import type { InputRecord, TaskRecord } from '../../store/types.ts'
import type { GatewayError } from '../../errors.ts'
import { toWireError } from '../../wire/error-replies.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'
import { taskTimes } from '../../wire/task-times.ts'

/** How the tasks extension (2026-07-28) writes tasks on the wire (spec-tasks §3, §4.2). */

/** The extension's status: a tool result with `isError: true` is `completed`, only a JSON-RPC error is `failed`. */
function modernStatus (task: TaskRecord): TaskRecord['status'] {
  if (task.status === 'failed' && task.outcome !== null && 'result' in task.outcome) return 'completed'
  return task.status
}

function baseTask (task: TaskRecord): JsonObject {
  const times = taskTimes(task)
  const wire: JsonObject = {
    taskId: task.id,
    status: modernStatus(task),
    createdAt: times.createdAt,
    lastUpdatedAt: times.lastUpdatedAt,
    ttlMs: task.ttlMs,
    pollIntervalMs: task.pollIntervalMs,
  }
  if (task.statusMessage !== null) wire.statusMessage = task.statusMessage
  return wire
}

/** The flat CreateTaskResult: returned only once the task is stored. */
export function renderCreateTaskResult (task: TaskRecord): JsonObject {
  const wire = baseTask(task)
  wire.resultType = 'task'
  return wire
}

/** The DetailedTask of tasks/get and notifications/tasks: outstanding inputs, the result or the error inline. */
export function renderDetailedTask (task: TaskRecord, pending: readonly InputRecord[]): JsonObject {
  const wire = baseTask(task)
  const status = wire.status
  if (status === 'input_required') {
    const inputRequests: JsonObject = {}
    for (const input of pending) inputRequests[input.key] = { method: input.method, params: input.params }
    wire.inputRequests = inputRequests
  } else if (status === 'completed' && task.outcome !== null && 'result' in task.outcome) {
    wire.result = { ...task.outcome.result, resultType: 'complete' }
  } else if (status === 'failed') {
    wire.error = task.outcome !== null && 'error' in task.outcome
      ? task.outcome.error
      : { code: -32603, message: task.statusMessage ?? 'the task failed' }
  }
  return wire
}

/** A DetailedTask last sent as `last`, now failed with `lost`: the store lost the task (GW_ERR_TASK_LOST_BY_STORE). */
export function renderLostTask (last: JsonObject, lost: GatewayError): JsonObject {
  const { inputRequests: _inputs, result: _result, ...rest } = last
  return { ...rest, status: 'failed', statusMessage: lost.message, lastUpdatedAt: new Date().toISOString(), error: toWireError(lost) as unknown as JsonObject }
}
