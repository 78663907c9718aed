// The 2026-07-28 upstream task dialect (tasks extension), whole: a tools/call answered with a task of the upstream's
// own, which the SDK must not see, followed to its end. The upstream session is faked; each response passes the
// session's call registry as the transport passes it, so the task is caught where it is in the gateway.
import { ProtocolError } from '@modelcontextprotocol/client'
import { describe, expect, it } from 'vitest'
import { modernToolCall } from '../../src/calls/extension-task.ts'
import { CallRegistry } from '../../src/upstream/call-attribution.ts'
import type { CallSink } from '../../src/upstream/inflight-call.ts'
import type { SessionRequestOptions, UpstreamSession } from '../../src/upstream/upstream-session.ts'
import type { JsonObject } from '../../src/wire/jsonrpc.ts'
import { CLIENT_CAPABILITIES_KEY, TASKS_EXTENSION } from '../../src/wire/versions.ts'

interface FakeSession {
  session: UpstreamSession
  sent: Array<[string, JsonObject]>
  calls: CallRegistry
}

/** A 2026-07-28 upstream session offering the tasks extension, answering each request with `answer`. */
function modernSession (answer: (method: string, params: JsonObject) => JsonObject): FakeSession {
  const calls = new CallRegistry()
  const sent: Array<[string, JsonObject]> = []
  let id = 0
  const session = {
    calls,
    capabilities: { elicitation: {} },
    offersTasks: true,
    client: { getProtocolEra: () => 'modern' },
    address: () => ({ sessionId: null, protocolVersion: '2026-07-28', era: 'modern' }),
    request: async (method: string, params: JsonObject, options: SessionRequestOptions) => {
      sent.push([method, params])
      const requestId = ++id
      calls.sent(requestId, calls.headers(options.call, undefined))
      // As the transport does with every response before the SDK reads it.
      const response: JsonObject = { jsonrpc: '2.0', id: requestId, result: answer(method, params) }
      calls.screen(response)
      calls.answered(requestId)
      const result = response.result as JsonObject
      if (result.resultType === 'task') throw new Error('the SDK refuses a task result')
      return result
    },
  }
  return { session: session as unknown as UpstreamSession, sent, calls }
}

function sinkOf (asked: JsonObject[], statuses: JsonObject[] = []): CallSink {
  return {
    input: async (method, params, _signal, key) => {
      asked.push({ method, params, key })
      return { action: 'accept', content: { sure: true } }
    },
    notify: () => {},
    upstreamTaskStatus: (status) => { statuses.push({ ...status }) },
  }
}

const options = (): { timeout: number, signal: AbortSignal } => ({ timeout: 60_000, signal: new AbortController().signal })

describe('the 2026-07-28 upstream task dialect', () => {
  it('keeps the upstream\'s task out of the SDK\'s sight and follows it to its result, relaying what it asks', async () => {
    let answered = false
    const { session, sent, calls } = modernSession((method) => {
      if (method === 'tools/call') return { resultType: 'task', taskId: 'up-1', status: 'working', pollIntervalMs: 10 }
      if (method === 'tasks/update') {
        answered = true
        return { resultType: 'complete' }
      }
      if (!answered) {
        return {
          taskId: 'up-1',
          status: 'input_required',
          statusMessage: 'waiting for you',
          pollIntervalMs: 10,
          inputRequests: { k1: { method: 'elicitation/create', params: { message: 'Sure?' } } },
        }
      }
      return { taskId: 'up-1', status: 'completed', result: { resultType: 'complete', content: [{ type: 'text', text: 'done' }] } }
    })
    const asked: JsonObject[] = []
    const statuses: JsonObject[] = []
    const call = calls.begin('client-1', sinkOf(asked, statuses))
    const created: string[] = []
    const hooks = { resumable: true, created: async (taskId: string) => { created.push(taskId) } }
    const result = await modernToolCall(session, call, { name: 'slow', arguments: {} }, options(), hooks)
    expect(result).toEqual({ content: [{ type: 'text', text: 'done' }] })
    expect(created).toEqual(['up-1'])
    expect(call.upstreamTaskId).toBe('up-1')
    // A resumable task's call declares the extension up front; the task's input is asked once, under its key.
    expect((sent[0]![1]._meta as JsonObject)[CLIENT_CAPABILITIES_KEY]).toMatchObject({ extensions: { [TASKS_EXTENSION]: {} } })
    expect(asked).toEqual([{ method: 'elicitation/create', params: { message: 'Sure?' }, key: 'k1' }])
    expect(sent.find(([method]) => method === 'tasks/update')![1]).toMatchObject({ taskId: 'up-1', inputResponses: { k1: { action: 'accept' } } })
    expect(statuses).toEqual([{ taskId: 'up-1', status: 'input_required', statusMessage: 'waiting for you' }])
  })

  it('declares the extension only when the upstream refuses a call for the lack of it, and then calls again', async () => {
    let refused = false
    const { session, sent, calls } = modernSession((method, params) => {
      const declared = (params._meta as JsonObject | undefined)?.[CLIENT_CAPABILITIES_KEY] !== undefined
      if (!declared) {
        refused = true
        throw new ProtocolError(-32021, 'this tool runs only as a task', { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } })
      }
      return { resultType: 'complete', content: [] }
    })
    const call = calls.begin('client-1', sinkOf([]))
    // A held call (not a task yet) does not offer the extension up front.
    const result = await modernToolCall(session, call, { name: 'only-task' }, options(), { resumable: true, held: true })
    expect(refused).toBe(true)
    expect(result).toEqual({ resultType: 'complete', content: [] })
    expect(sent.map(([method]) => method)).toEqual(['tools/call', 'tools/call'])
  })

  it('leaves a task result that answers anything but a call\'s own tools/call to the SDK', async () => {
    const { session, calls } = modernSession(() => ({ resultType: 'task', taskId: 'stray', status: 'working' }))
    const call = calls.begin('client-1', sinkOf([]))
    await expect(session.request('prompts/get', { name: 'p' }, { timeout: 1000, call })).rejects.toThrow('the SDK refuses a task result')
    await expect(session.request('tasks/get', { taskId: 'stray' }, { timeout: 1000 })).rejects.toThrow('the SDK refuses a task result')
  })
})
