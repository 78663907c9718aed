import { ProtocolError } from '@modelcontextprotocol/client'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { ClientSideTasks, MAX_CLIENT_TASK_TTL_MS } from '../../src/upstream/client-side-tasks.ts'
import { mirrorCapabilities, principalClient, sessionClient } from '../../src/upstream/client-ref.ts'

type Json = Record<string, unknown>

const NEVER = new AbortController().signal

/** A request the client answers when the test says so, and whether it was stopped meanwhile. */
interface PendingAnswer {
  run: (signal: AbortSignal) => Promise<Json>
  answer: (value: Json) => void
  fail: (err: Error) => void
  stopped: () => boolean
}

function pendingAnswer (): PendingAnswer {
  let answer!: (value: Json) => void
  let fail!: (err: Error) => void
  let signal: AbortSignal | undefined
  const run = async (given: AbortSignal): Promise<Json> => {
    signal = given
    return await new Promise<Json>((resolve, reject) => {
      answer = resolve
      fail = reject
      given.addEventListener('abort', () => reject(given.reason), { once: true })
    })
  }
  return { run, answer: (v) => answer(v), fail: (e) => fail(e), stopped: () => signal?.aborted === true }
}

function taskIdOf (created: Json): string {
  return String((created.task as Json).taskId)
}

describe('the tasks the gateway runs for an upstream on behalf of a task-capable client', () => {
  afterEach(() => { vi.useRealTimers() })

  it('answers at once with a working task, then gives the server the client\'s answer from tasks/result, tagged with the task', async () => {
    const tasks = new ClientSideTasks()
    const asked = pendingAnswer()
    const created = tasks.create({ ttl: 60_000 }, asked.run)
    const taskId = taskIdOf(created)
    expect(created.task).toMatchObject({ status: 'working', ttl: 60_000 })
    expect(taskId.length).toBeGreaterThanOrEqual(22)
    const result = tasks.answer('tasks/result', { taskId }, NEVER)
    expect(await tasks.answer('tasks/get', { taskId }, NEVER)).toMatchObject({ taskId, status: 'working' })
    asked.answer({ role: 'assistant', content: { type: 'text', text: 'hi' }, model: 'm' })
    expect(await result).toEqual({
      role: 'assistant',
      content: { type: 'text', text: 'hi' },
      model: 'm',
      _meta: { 'io.modelcontextprotocol/related-task': { taskId } },
    })
    expect(await tasks.answer('tasks/get', { taskId }, NEVER)).toMatchObject({ status: 'completed' })
    expect(((await tasks.answer('tasks/list', {}, NEVER)).tasks as Json[]).map((t) => t.taskId)).toEqual([taskId])
  })

  it('fails the task with the error the client\'s request got, and tasks/result gives that same error', async () => {
    const tasks = new ClientSideTasks()
    const asked = pendingAnswer()
    const taskId = taskIdOf(tasks.create(undefined, asked.run))
    asked.fail(new ProtocolError(-32601, "the downstream client did not declare the 'sampling' capability"))
    await expect(tasks.answer('tasks/result', { taskId }, NEVER)).rejects.toMatchObject({ code: -32601, message: expect.stringContaining("'sampling'") })
    expect(await tasks.answer('tasks/get', { taskId }, NEVER)).toMatchObject({ status: 'failed' })
  })

  it('stops asking the client when the server cancels the task, and refuses to cancel it twice', async () => {
    const tasks = new ClientSideTasks()
    const asked = pendingAnswer()
    const taskId = taskIdOf(tasks.create({}, asked.run))
    expect(await tasks.answer('tasks/cancel', { taskId }, NEVER)).toMatchObject({ taskId, status: 'cancelled' })
    expect(asked.stopped()).toBe(true)
    expect(await tasks.answer('tasks/get', { taskId }, NEVER)).toMatchObject({ status: 'cancelled' })
    await expect(tasks.answer('tasks/cancel', { taskId }, NEVER)).rejects.toMatchObject({ code: -32602 })
    await expect(tasks.answer('tasks/result', { taskId }, NEVER)).rejects.toBeInstanceOf(ProtocolError)
  })

  it('answers -32602 for a task it does not know', async () => {
    const tasks = new ClientSideTasks()
    await expect(tasks.answer('tasks/get', { taskId: 'nope' }, NEVER)).rejects.toMatchObject({ code: -32602 })
    await expect(tasks.answer('tasks/result', { taskId: 'nope' }, NEVER)).rejects.toMatchObject({ code: -32602 })
  })

  it('keeps a task no longer than the ttl it names (at most an hour), and stops asking when it expires', async () => {
    vi.useFakeTimers()
    const tasks = new ClientSideTasks()
    const asked = pendingAnswer()
    const created = tasks.create({ ttl: 10 * MAX_CLIENT_TASK_TTL_MS }, asked.run)
    expect((created.task as Json).ttl).toBe(MAX_CLIENT_TASK_TTL_MS)
    vi.advanceTimersByTime(MAX_CLIENT_TASK_TTL_MS)
    expect(tasks.size).toBe(0)
    expect(asked.stopped()).toBe(true)
  })

  it('stops every task when its session closes', () => {
    const tasks = new ClientSideTasks()
    const one = pendingAnswer()
    const two = pendingAnswer()
    tasks.create({}, one.run)
    tasks.create({}, two.run)
    tasks.close()
    expect([one.stopped(), two.stopped()]).toEqual([true, true])
    expect(() => tasks.create({}, pendingAnswer().run)).toThrow(ProtocolError)
  })
})

describe('the client capabilities an upstream session declares', () => {
  it('declares the client-side part of a 2025-11-25 client\'s tasks capability, and nothing of it the gateway cannot honour', () => {
    const declared = mirrorCapabilities({
      sampling: {},
      tasks: {
        list: {},
        cancel: {},
        requests: { sampling: { createMessage: {} }, elicitation: { create: {} }, tools: { call: {} } },
        future: {},
      },
      experimental: { x: {} },
    })
    expect(declared).toEqual({
      sampling: {},
      tasks: { list: {}, cancel: {}, requests: { sampling: { createMessage: {} }, elicitation: { create: {} } } },
    })
    expect(mirrorCapabilities({ sampling: {}, tasks: { requests: { tools: { call: {} } } } })).toEqual({ sampling: {} })
  })

  it('gives clients that differ only in their tasks capability different list keys (a server may offer them different tools)', () => {
    const plain = sessionClient('s-plain', 'anonymous', { sampling: {} })
    const capable = sessionClient('s-capable', 'anonymous', { sampling: {}, tasks: { requests: { sampling: { createMessage: {} } } } })
    expect(capable.signature).not.toBe(plain.signature)
  })

  it('declares no extension of a 2026-07-28 client: the tasks extension is the gateway\'s to declare per request', () => {
    const client = principalClient('anonymous', { sampling: {}, extensions: { 'io.modelcontextprotocol/tasks': {} } })
    expect(client.capabilities).toEqual({ sampling: {} })
  })
})
