/** A v1 SDK test client for the upstream smoke tests, answering elicitation, sampling and roots. */
import { expect } from 'vitest'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  McpError,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type CreateMessageRequest,
  type ElicitRequest,
  type ElicitResult,
  type Progress,
} from '@modelcontextprotocol/sdk/types.js'
import { textOf } from './clients.ts'

export const ROOTS = [{ uri: 'file:///tmp/demo-root', name: 'demo-root' }]

/** What the test client saw and how it answers server→client requests. */
export interface ClientState {
  elicitations: ElicitRequest['params'][]
  samplings: CreateMessageRequest['params'][]
  updatedUris: string[]
  toolListChanges: number
  /** The answer to the next form-mode elicitation (URL mode is always accepted). */
  formAnswer: ElicitResult
}

export function createTestClient (): { client: Client, state: ClientState } {
  const state: ClientState = {
    elicitations: [],
    samplings: [],
    updatedUris: [],
    toolListChanges: 0,
    formAnswer: { action: 'accept', content: { name: 'Ada' } },
  }
  const client = new Client({ name: 'demo-upstreams-test', version: '1.0.0' }, {
    capabilities: { elicitation: { form: {}, url: {} }, sampling: {}, roots: { listChanged: true } },
  })
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    state.elicitations.push(request.params)
    return request.params.mode === 'url' ? { action: 'accept' } : state.formAnswer
  })
  client.setRequestHandler(CreateMessageRequestSchema, (request) => {
    state.samplings.push(request.params)
    return { role: 'assistant', content: { type: 'text', text: 'A short summary.' }, model: 'test-model', stopReason: 'endTurn' }
  })
  client.setRequestHandler(ListRootsRequestSchema, () => ({ roots: ROOTS }))
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
    state.updatedUris.push(notification.params.uri)
  })
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { state.toolListChanges++ })
  return { client, state }
}

export async function call (client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return CallToolResultSchema.parse(await client.callTool({ name, arguments: args }))
}

export async function rpcErrorOf (promise: Promise<unknown>): Promise<McpError> {
  const error: unknown = await promise.then(() => undefined, (reason: unknown) => reason)
  if (!(error instanceof McpError)) throw new Error(`expected a JSON-RPC error, got ${String(error)}`)
  return error
}

/**
 * Calls `slow` (long) with a progress callback and aborts it on the first progress notification.
 * This is also the deterministic progress check: the call cannot finish before the abort.
 */
export async function startAndCancelSlow (client: Client): Promise<void> {
  const controller = new AbortController()
  const progress: Progress[] = []
  const pending = client.callTool({ name: 'slow', arguments: { duration: 60_000, steps: 600 } }, undefined, {
    signal: controller.signal,
    onprogress: (update) => {
      progress.push(update)
      controller.abort('test cancel')
    },
  })
  await expect(pending).rejects.toThrow(/test cancel/)
  expect(progress[0]).toEqual({ progress: 1, total: 600, message: 'step 1/600' })
}

/**
 * Runs `slow` to completion. The SDK client dispatches notifications on a microtask but settles
 * responses synchronously, so progress notifications that arrive in the same read as the result
 * can be dropped; only the order and values of those that did arrive are checked here.
 */
export async function slowWithProgress (client: Client): Promise<void> {
  const progress: Progress[] = []
  const result = CallToolResultSchema.parse(await client.callTool({ name: 'slow', arguments: { duration: 30, steps: 3 } }, undefined, {
    onprogress: (update) => { progress.push(update) },
  }))
  expect(textOf(result)).toBe('slow finished: 3 steps in 30 ms')
  const expected = [[1, 3], [2, 3], [3, 3]].slice(0, progress.length)
  expect(progress.map((p) => [p.progress, p.total])).toEqual(expected)
}

export interface OpenedDemo { client: Client, state: ClientState, stderr: () => string, close: () => Promise<void> }
