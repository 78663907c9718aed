import type { Handler } from '../../dispatch/context.ts'
import { optionalObject, requireString } from '../../wire/params.ts'
import { GatewayError } from '../../errors.ts'
import type { TaskStore } from '../../store/types.ts'
import type { TaskInputs } from '../../tasks/task-inputs.ts'
import type { TaskService } from '../../tasks/task-service.ts'
import { isTerminal } from '../../wire/task-state.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'
import { declaresTasks, tasksCapabilityRequired } from './envelope.ts'
import { ignoreWithTrace } from '../../observability/ignored.ts'
import { renderDetailedTask } from './task-wire.ts'

export interface ModernTaskMethodDeps {
  tasks: TaskService
  inputs: TaskInputs
  store: TaskStore
}

/**
 * tasks/get, tasks/update and tasks/cancel of the tasks extension. They work on every task of the
 * caller's principal, including tasks created through the 2025-11-25 flow, rendered in this dialect.
 */
export function modernTaskMethods (deps: ModernTaskMethodDeps): Readonly<Record<'tasks/get' | 'tasks/update' | 'tasks/cancel', Handler>> {
  const { tasks, inputs, store } = deps
  const guard = (capabilities: JsonObject): void => {
    if (!declaresTasks(capabilities)) throw tasksCapabilityRequired()
  }

  const get: Handler = async (params, ctx) => {
    guard(ctx.clientCapabilities)
    const task = await tasks.get(ctx.client.principal, requireString(params, 'taskId'), ctx.trace)
    const pending = task.status === 'input_required' ? await store.pendingInputs(task.id) : []
    if (isTerminal(task.status)) tasks.retrieved(task, 'tasks/get')
    const wire = renderDetailedTask(task, pending)
    wire.resultType = 'complete'
    return wire
  }

  const update: Handler = async (params, ctx) => {
    guard(ctx.clientCapabilities)
    const task = await tasks.get(ctx.client.principal, requireString(params, 'taskId'), ctx.trace)
    const responses = optionalObject(params, 'inputResponses') ?? {}
    const answers: Array<[string, JsonObject]> = []
    for (const [key, answer] of Object.entries(responses)) {
      const input = await store.getInput(key)
      // Keys that are not outstanding inputs of this task are ignored, as the extension asks.
      if (!input || input.taskId !== task.id) continue
      // An answer is the result of the input request: an object. Nothing is answered unless every one is.
      if (answer === null || typeof answer !== 'object' || Array.isArray(answer)) {
        throw new GatewayError('GW_ERR_RPC_INVALID_PARAMS', [`'inputResponses.${key}' must be an object: the result of that input request`])
      }
      answers.push([key, answer as JsonObject])
    }
    for (const [key, answer] of answers) await inputs.answer(ctx.client.principal, { jsonrpc: '2.0', id: key, result: answer })
    return { resultType: 'complete' }
  }

  const cancel: Handler = async (params, ctx) => {
    guard(ctx.clientCapabilities)
    const task = await tasks.get(ctx.client.principal, requireString(params, 'taskId'), ctx.trace)
    // An acknowledgement either way: cancelling a task that already ended changes nothing.
    if (!isTerminal(task.status)) await tasks.cancel(ctx.client.principal, task.id).catch(ignoreWithTrace(ctx.log, 'tasks/cancel is acknowledged even when the cancel failed: the client reads the task\'s status with tasks/get', { taskId: task.id }))
    return { resultType: 'complete' }
  }

  return { 'tasks/get': get, 'tasks/update': update, 'tasks/cancel': cancel }
}
