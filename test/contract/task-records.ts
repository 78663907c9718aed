/** Records the store contract suites build their cases from. */
import { randomUUID } from 'node:crypto'
import type { InputRecord, TaskOutcome, TaskRecord } from '../../src/store/types.ts'

export const T0 = 1_000_000

export function task (overrides: Partial<TaskRecord> = {}): TaskRecord {
  return {
    id: randomUUID(),
    principal: `principal:${randomUUID()}`,
    sessionId: randomUUID(),
    era: '2025-11-25',
    status: 'working',
    statusMessage: 'queued: waiting for a free connection',
    createdAt: T0,
    lastUpdatedAt: T0,
    ttlMs: 60_000,
    pollIntervalMs: 750,
    upstream: 'demo',
    tool: 'slow_echo',
    request: { arguments: { text: 'héllo', nested: { n: 1.5, list: [1, 'two', null, true] } }, _meta: { trace: 'abc' } },
    progressToken: 'progress-1',
    clientCapabilities: { elicitation: { form: {}, url: {} }, sampling: {} },
    outcome: null,
    owner: 'gateway-a',
    traceContext: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    resume: null,
    ...overrides,
  }
}

export function input (of: TaskRecord, overrides: Partial<InputRecord> = {}): InputRecord {
  return {
    key: `in-${randomUUID()}`,
    taskId: of.id,
    principal: of.principal,
    method: 'elicitation/create',
    params: { message: 'Which colour?', requestedSchema: { type: 'object', properties: { colour: { type: 'string' } } } },
    state: 'pending',
    createdAt: T0 + 10,
    answer: null,
    ...overrides,
  }
}

export const completed: TaskOutcome = { result: { content: [{ type: 'text', text: 'done' }], isError: false } }
export const rpcFailure: TaskOutcome = { error: { code: -32603, message: 'upstream broke', data: { reason: 'disk full', retry: [1, 2] } } }
