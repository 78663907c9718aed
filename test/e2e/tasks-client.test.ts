import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { CallToolResultSchema, CreateTaskResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { DEMO_MAIN } from '../helpers/built.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { runTask, waitForStatus } from '../helpers/tasks.ts'
import { until } from '../helpers/until.ts'

/**
 * The 2025-11-25 task dialect driven by the v1 SDK client's own task API, against upstreams that know
 * nothing about tasks: the demo over stdio and the v1 fixture over Streamable HTTP.
 */
describe.each(['stdio', 'streamable-http'] as const)('tasks through the gateway to the demo over %s (2025-11-25, v1 SDK client)', (transport) => {
  let v1: StartedUpstream
  let demoHttp: StartedUpstream | undefined
  let gw: RunningGateway
  let client: Client
  const elicitAnswers: Array<'accept' | 'decline'> = []

  beforeAll(async () => {
    v1 = await startUpstream('test/fixtures/v1-http-upstream.ts', ['--port', '0'])
    const toolSettings = { echo: { taskSupport: 'forbidden' }, fail_tool: { taskSupport: 'optional' }, list_roots: { taskSupport: 'required' } }
    if (transport === 'streamable-http') demoHttp = await startUpstream(DEMO_MAIN, ['--http', '0'])
    const demo = demoHttp ? { name: 'demo', transport: 'streamable-http', url: demoHttp.url, toolSettings } : demoStdio({ toolSettings })
    gw = await startGateway({
      tasks: { pollInterval: '50ms' },
      upstreams: [
        demo,
        { name: 'plain', transport: 'streamable-http', url: v1.url },
      ],
    })
    client = await connectV1(gw.url, {
      onElicit: () => {
        const action = elicitAnswers.shift() ?? 'accept'
        return action === 'accept' ? { action, content: { name: 'Grace' } } : { action }
      },
      onSample: () => ({ role: 'assistant', model: 'm', content: { type: 'text', text: 'sampled inside a task' } }),
      onRoots: () => ({ roots: [{ uri: 'file:///srv/task-root', name: 'root' }] }),
    })
  })

  afterAll(async () => {
    await client?.close()
    await gw?.close()
    await v1?.close()
    await demoHttp?.close()
  })

  it('advertises tasks and each tool\'s task support', async () => {
    expect(client.getServerCapabilities()?.tasks).toEqual({ list: {}, cancel: {}, requests: { tools: { call: {} } } })
    const tools = new Map((await client.listTools()).tools.map((t) => [t.name, t.execution?.taskSupport]))
    expect(tools.get('demo__slow')).toBe('optional')
    expect(tools.get('demo__echo')).toBe('forbidden')
    expect(tools.get('demo__list_roots')).toBe('required')
  })

  it('runs a plain tool as a task and returns exactly the upstream result', async () => {
    const outcome = await runTask(client, 'demo__slow', { duration: 50, steps: 2 })
    expect(outcome.error).toBeUndefined()
    expect(outcome.taskId).toMatch(/^[A-Za-z0-9_-]{22}$/)
    expect(textOf(outcome.result)).toContain('2 steps')
    expect(outcome.result?._meta?.['io.modelcontextprotocol/related-task']).toEqual({ taskId: outcome.taskId })
    const task = await client.experimental.tasks.getTask(outcome.taskId!)
    expect(task).toMatchObject({ status: 'completed', ttl: 60_000, pollInterval: 50 })
  })

  it('keeps forwarding progress with the client\'s token while the task runs', async () => {
    const seen: number[] = []
    const outcome = await runTask(client, 'demo__slow', { duration: 200, steps: 4 }, { onprogress: (p) => seen.push(p.progress) })
    expect(textOf(outcome.result)).toContain('4 steps')
    expect(seen.length).toBeGreaterThanOrEqual(2)
  })

  it('relays an elicitation inside a task, accepted and declined', async () => {
    elicitAnswers.push('accept')
    const accepted = await runTask(client, 'demo__ask_user', { message: 'Name?' })
    expect(textOf(accepted.result)).toContain('Grace')
    elicitAnswers.push('decline')
    const declined = await runTask(client, 'demo__ask_user', {})
    expect(textOf(declined.result).toLowerCase()).toContain('declined')
  })

  it('relays sampling and roots inside a task', async () => {
    const sampled = await runTask(client, 'demo__summarize', { text: 'long text' })
    expect(textOf(sampled.result)).toContain('sampled inside a task')
    const roots = await runTask(client, 'demo__list_roots', {})
    expect(textOf(roots.result)).toContain('file:///srv/task-root')
  })

  it('fails a task whose tool returns isError, with the tool\'s text as statusMessage and the full result kept', async () => {
    const outcome = await runTask(client, 'demo__fail_tool', { reason: 'disk full' })
    expect(outcome.error).toBeDefined()
    const task = await client.experimental.tasks.getTask(outcome.taskId!)
    expect(task.status).toBe('failed')
    expect(task.statusMessage).toContain('disk full')
    const result = await client.experimental.tasks.getTaskResult(outcome.taskId!, CallToolResultSchema)
    expect(result.isError).toBe(true)
    expect(textOf(result)).toContain('disk full')
  })

  it('fails a task whose tool throws a JSON-RPC error and returns that error from tasks/result', async () => {
    const outcome = await runTask(client, 'demo__throw_error', { code: -32011, message: 'quota exceeded' })
    const task = await client.experimental.tasks.getTask(outcome.taskId!)
    expect(task).toMatchObject({ status: 'failed', statusMessage: expect.stringContaining('quota exceeded') })
    const error = await client.experimental.tasks.getTaskResult(outcome.taskId!, CallToolResultSchema).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(McpError)
    expect((error as McpError).code).toBe(-32011)
  })

  it('cancels a running task: cancelled before the reply, and the upstream sees the cancellation', async () => {
    const created = await client.request({ method: 'tools/call', params: { name: 'plain__slow', arguments: { duration: 30_000, steps: 300 }, task: { ttl: 60_000 } } }, CreateTaskResultSchema)
    const taskId = created.task.taskId
    await waitForStatus(client, taskId, ['working'])
    await until('the upstream to run the call', async () => textOf(await client.callTool({ name: 'plain__running', arguments: {} })) !== '0' || undefined, { everyMs: 10 })
    const cancelled = await client.experimental.tasks.cancelTask(taskId)
    expect(cancelled.status).toBe('cancelled')
    expect((await client.experimental.tasks.getTask(taskId)).status).toBe('cancelled')
    let seen: unknown[] = []
    for (let i = 0; i < 100 && seen.length === 0; i++) {
      seen = JSON.parse(textOf(await client.callTool({ name: 'plain__cancellations', arguments: {} }))) as unknown[]
    }
    expect(seen.length).toBeGreaterThanOrEqual(1)
    const again = await client.experimental.tasks.cancelTask(taskId).catch((e: unknown) => e)
    expect((again as McpError).code).toBe(-32602)
  })

  it('lists the caller\'s tasks and enforces the tools\' task policy', async () => {
    const { tasks } = await client.experimental.tasks.listTasks()
    expect(tasks.length).toBeGreaterThanOrEqual(5)
    const forbidden = await client.request({ method: 'tools/call', params: { name: 'demo__echo', arguments: { text: 'x' }, task: {} } }, CreateTaskResultSchema).catch((e: unknown) => e)
    expect((forbidden as McpError).code).toBe(-32601)
    const required = await client.request({ method: 'tools/call', params: { name: 'demo__list_roots', arguments: {} } }, CallToolResultSchema).catch((e: unknown) => e)
    expect((required as McpError).code).toBe(-32601)
  })

  it('forgets a task after its TTL: tasks/get then answers -32602 like an unknown id', async () => {
    const outcome = await runTask(client, 'demo__slow', { duration: 10, steps: 1 }, { ttl: 300 })
    const error = await until('the task to be forgotten', async () => await client.experimental.tasks.getTask(outcome.taskId!).then(() => undefined, (e: unknown) => e))
    expect((error as McpError).code).toBe(-32602)
    const unknown = await client.experimental.tasks.getTask('no-such-task').catch((e: unknown) => e)
    expect((unknown as McpError).message).toBe((error as McpError).message.replace(outcome.taskId!, 'no-such-task'))
  })
})
