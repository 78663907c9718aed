import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { until } from './until.ts'

export interface StreamOutcome {
  taskId: string | undefined
  statuses: string[]
  result: CallToolResult | undefined
  error: Error | undefined
}

/** Runs a tool as a task through the v1 SDK client's task API and collects what the stream yields. */
export async function runTask (
  client: Client,
  name: string,
  args: Record<string, unknown>,
  options: { ttl?: number, onprogress?: (p: { progress: number }) => void } = {},
): Promise<StreamOutcome> {
  const outcome: StreamOutcome = { taskId: undefined, statuses: [], result: undefined, error: undefined }
  const stream = client.experimental.tasks.callToolStream({ name, arguments: args }, undefined, {
    task: { ttl: options.ttl ?? 60_000 },
    timeout: 60_000,
    ...(options.onprogress && { onprogress: options.onprogress }),
  })
  for await (const message of stream) {
    if (message.type === 'taskCreated') outcome.taskId = message.task.taskId
    if (message.type === 'taskStatus') outcome.statuses.push(message.task.status)
    if (message.type === 'result') outcome.result = message.result as CallToolResult
    if (message.type === 'error') outcome.error = message.error
  }
  return outcome
}

/** Polls tasks/get until the task has one of `statuses` (bounded). */
export async function waitForStatus (client: Client, taskId: string, statuses: string[]): Promise<string> {
  return await until(`task ${taskId} reaching ${statuses.join('/')}`, async () => {
    const task = await client.experimental.tasks.getTask(taskId)
    return statuses.includes(task.status) ? task.status : undefined
  })
}
