// The one reading of a POSTed body: what kind of message it is, its id and method, the era it speaks, whether the
// task rate limits count it, and for a body the gateway refuses, the error and the id that refusal answers.
import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../src/errors.ts'
import { methodLabel } from '../../src/observability/metrics.ts'
import { answeredId, classifyPost, type ClassifiedMessage } from '../../src/wire/classified-message.ts'

const ENVELOPE = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
}

function modern (id: number, method: string, params: Record<string, unknown> = {}): Record<string, unknown> {
  return { jsonrpc: '2.0', id, method, params: { ...params, _meta: ENVELOPE } }
}

/** The refusal of an invalid body: its code and what its message says. */
function refusal (message: ClassifiedMessage): { code: string, message: string, id: unknown } {
  if (message.kind !== 'invalid') throw new Error(`expected an invalid message, got a ${message.kind}`)
  expect(message.error).toBeInstanceOf(GatewayError)
  return { code: message.error.code, message: message.error.message, id: message.id }
}

describe('classifyPost', () => {
  it('reads a 2025 request once: its id, method and era, frozen', () => {
    const body = { jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} }
    const message = classifyPost(body, '2025-11-25')
    expect(message).toMatchObject({ kind: 'request', era: '2025-11-25', id: 7, method: 'tools/list', taskOperation: false, taskId: undefined })
    expect(message.kind === 'request' && message.message).toBe(body)
    expect(Object.isFrozen(message)).toBe(true)
    expect(classifyPost({ jsonrpc: '2.0', id: 'a', method: 'ping' }, undefined)).toMatchObject({ kind: 'request', era: '2025-11-25', id: 'a' })
  })

  it('reads a 2026-07-28 request by the protocol version in its envelope, whatever its header says', () => {
    expect(classifyPost(modern(1, 'tools/list'), '2026-07-28')).toMatchObject({ kind: 'request', era: '2026-07-28', method: 'tools/list' })
    expect(classifyPost(modern(1, 'tools/list'), undefined)).toMatchObject({ era: '2026-07-28' })
    expect(classifyPost(modern(1, 'tools/list'), '2025-11-25')).toMatchObject({ era: '2026-07-28' })
  })

  it('takes a 2026-07-28 header without an envelope as a modern request missing it; an unknown or repeated header as 2025', () => {
    const bare = { jsonrpc: '2.0', id: 1, method: 'tools/list' }
    expect(classifyPost(bare, '2026-07-28')).toMatchObject({ kind: 'request', era: '2026-07-28' })
    expect(classifyPost(bare, '2099-01-01')).toMatchObject({ era: '2025-11-25' })
    expect(classifyPost(bare, ['2026-07-28', '2026-07-28'])).toMatchObject({ era: '2025-11-25' })
  })

  it('reads notifications and responses of either era', () => {
    expect(classifyPost({ jsonrpc: '2.0', method: 'notifications/initialized' }, '2025-11-25'))
      .toMatchObject({ kind: 'notification', era: '2025-11-25', method: 'notifications/initialized' })
    expect(classifyPost({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, _meta: ENVELOPE } }, undefined))
      .toMatchObject({ kind: 'notification', era: '2026-07-28' })
    expect(classifyPost({ jsonrpc: '2.0', id: 'q1', result: { action: 'accept' } }, '2025-11-25')).toMatchObject({ kind: 'response', era: '2025-11-25', id: 'q1' })
    const failed = classifyPost({ jsonrpc: '2.0', id: null, error: { code: -1, message: 'no' } }, undefined)
    expect(failed).toMatchObject({ kind: 'response', id: null })
    expect(Object.isFrozen(failed)).toBe(true)
  })

  it('tells a 2025-11-25 task operation: tools/call with params.task, and every tasks/* request with its task id', () => {
    const call = classifyPost({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'demo__slow', task: { ttl: 60_000 } } }, '2025-11-25')
    expect(call).toMatchObject({ kind: 'request', taskOperation: true, taskId: undefined })
    const get = classifyPost({ jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { taskId: 't-1' } }, '2025-11-25')
    expect(get).toMatchObject({ taskOperation: true, taskId: 't-1' })
    expect(classifyPost({ jsonrpc: '2.0', id: 3, method: 'tasks/list' }, undefined)).toMatchObject({ taskOperation: true, taskId: undefined })
    expect(classifyPost({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'x' } }, undefined)).toMatchObject({ taskOperation: false })
    expect(classifyPost({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'x', task: null } }, undefined)).toMatchObject({ taskOperation: false })
  })

  it('tells a 2026-07-28 task operation: tasks/get and tasks/update, not a tools/call (the gateway decides those later)', () => {
    expect(classifyPost(modern(1, 'tasks/get', { taskId: 't-2' }), '2026-07-28')).toMatchObject({ era: '2026-07-28', taskOperation: true, taskId: 't-2' })
    expect(classifyPost(modern(2, 'tasks/update', { taskId: 't-2', inputResponses: {} }), '2026-07-28')).toMatchObject({ taskOperation: true, taskId: 't-2' })
    expect(classifyPost(modern(3, 'tools/call', { name: 'demo__slow' }), '2026-07-28')).toMatchObject({ taskOperation: false, taskId: undefined })
    // Only a string names a task: anything else is left for the method to refuse.
    expect(classifyPost(modern(4, 'tasks/get', { taskId: 42 }), '2026-07-28')).toMatchObject({ taskOperation: true, taskId: undefined })
  })

  it('refuses what is no JSON-RPC message with the -32600 of today, answering the id of anything shaped like a request', () => {
    expect(refusal(classifyPost({ id: 3, method: 'tools/list' }, undefined)))
      .toMatchObject({ code: 'GW_ERR_HTTP_INVALID_MESSAGE', message: expect.stringContaining('"jsonrpc" must be "2.0"'), id: 3 })
    expect(refusal(classifyPost('hello', undefined))).toMatchObject({ code: 'GW_ERR_HTTP_INVALID_MESSAGE', message: expect.stringContaining('object'), id: null })
    expect(refusal(classifyPost(null, undefined))).toMatchObject({ code: 'GW_ERR_HTTP_INVALID_MESSAGE', id: null })
    expect(refusal(classifyPost({ jsonrpc: '2.0', id: 1, method: 'x', params: [1] }, undefined)))
      .toMatchObject({ message: expect.stringContaining('"params" must be an object'), id: 1 })
    expect(refusal(classifyPost({ jsonrpc: '2.0', id: 1.5, method: 'x' }, undefined)))
      .toMatchObject({ message: expect.stringContaining('"id" must be a string or an integer'), id: null })
    expect(refusal(classifyPost({ jsonrpc: '2.0', id: 1, method: 7 }, undefined))).toMatchObject({ message: expect.stringContaining('"method" must be a string') })
    expect(refusal(classifyPost({ jsonrpc: '2.0', id: 1, result: 'yes' }, undefined))).toMatchObject({ message: expect.stringContaining('"result" must be an object'), id: null })
    expect(refusal(classifyPost({ jsonrpc: '2.0', id: 1 }, undefined))).toMatchObject({ message: expect.stringContaining('exactly one of "result" and "error"') })
  })

  it('refuses a batch, and a message nested deeper than a hundred levels, keeping the era it claims', () => {
    expect(refusal(classifyPost([{ jsonrpc: '2.0', id: 1, method: 'ping' }], undefined))).toMatchObject({ code: 'GW_ERR_HTTP_BATCH_UNSUPPORTED', id: null })
    let deep: unknown = {}
    for (let i = 0; i < 120; i++) deep = { deep }
    const nested = classifyPost(modern(9, 'tools/call', { name: 'x', arguments: deep }), '2026-07-28')
    expect(refusal(nested)).toMatchObject({ message: expect.stringContaining('nest more than 100 levels'), id: 9 })
    expect(nested.era).toBe('2026-07-28')
  })
})

describe('what the route hands on', () => {
  it('answers an error ending the exchange with the id of a request or of a refused request-like body, else null', () => {
    expect(answeredId(classifyPost({ jsonrpc: '2.0', id: 'r', method: 'ping' }, undefined))).toBe('r')
    expect(answeredId(classifyPost({ id: 5, method: 'ping' }, undefined))).toBe(5)
    expect(answeredId(classifyPost({ jsonrpc: '2.0', id: 'q', result: {} }, undefined))).toBeNull()
    expect(answeredId(classifyPost({ jsonrpc: '2.0', method: 'notifications/initialized' }, undefined))).toBeNull()
    expect(answeredId(undefined)).toBeNull()
  })

  it('labels each kind with a bounded name for the metrics and the span', () => {
    const label = (body: unknown): string => methodLabel(classifyPost(body, undefined))
    expect(label({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'x' } })).toBe('tools/call')
    expect(label(modern(1, 'server/discover'))).toBe('server/discover')
    expect(label({ jsonrpc: '2.0', id: 1, method: 'vendor/anything' })).toBe('other')
    expect(label({ jsonrpc: '2.0', method: 'notifications/progress' })).toBe('notification')
    expect(label({ jsonrpc: '2.0', id: 1, result: {} })).toBe('response')
    expect(label([1, 2])).toBe('invalid')
    expect(label({ id: 1, method: 'tools/call' })).toBe('invalid')
  })
})
