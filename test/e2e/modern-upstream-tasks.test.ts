import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js'
import { connectV1, textOf } from '../helpers/clients.ts'
import { CountingProxy } from '../helpers/counting-proxy.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { runTask, waitForStatus } from '../helpers/tasks.ts'
import { until } from '../helpers/until.ts'

/**
 * A 2026-07-28 upstream with the tasks extension (the gateway itself, deciding to run every call it may as a task,
 * in front of the demo server): the gateway in front of it declares the extension on the calls of its own tasks,
 * follows the task the upstream answers with (tasks/get at the upstream's poll interval), relays what the task
 * asks for and sends the answers back with tasks/update, and cancels it with tasks/cancel.
 */
describe('a 2026-07-28 upstream that runs calls as its own tasks', () => {
  let upstream: RunningGateway
  let proxy: CountingProxy
  let plainProxy: CountingProxy
  let gw: RunningGateway
  let client: Client
  const asked: Array<Record<string, unknown>> = []
  /** Upstreams a test replaced, closed at the end (closing one waits for the calls it still runs). */
  const retired: RunningGateway[] = []

  beforeAll(async () => {
    upstream = await startGateway({
      upstreams: [demoStdio({ toolSettings: { echo: { taskSupport: 'required' } } })],
      tasks: { decide: 'always', pollInterval: '50ms' },
    })
    proxy = new CountingProxy(upstream.url)
    plainProxy = new CountingProxy(upstream.url)
    await Promise.all([proxy.listen(), plainProxy.listen()])
    gw = await startGateway({
      tasks: { pollInterval: '50ms' },
      upstreams: [
        { name: 'u', transport: 'streamable-http', url: proxy.url, era: 'auto' },
        // The same upstream with resume off: its tasks' calls do not declare the extension.
        { name: 'p', transport: 'streamable-http', url: plainProxy.url, era: 'auto', resume: 'off', tools: { allow: ['demo__slow'] }, prompts: { deny: ['*'] }, resources: { deny: ['*'] } },
      ],
    })
    client = await connectV1(gw.url, {
      onElicit: (params) => {
        asked.push(params)
        return { action: 'accept', content: { name: 'Tess' } }
      },
    })
  })

  afterAll(async () => {
    await client?.close()
    await gw?.close()
    await proxy?.close()
    await plainProxy?.close()
    await Promise.all([upstream, ...retired].map(async (gw) => await gw?.close()))
  })

  it('runs a task as the upstream\'s own task and returns its result', async () => {
    const before = proxy.count('tasks/get')
    const outcome = await runTask(client, 'u__demo__slow', { duration: 300, steps: 3 })
    expect(outcome.error).toBeUndefined()
    expect(textOf(outcome.result)).toBe('slow finished: 3 steps in 300 ms')
    expect(proxy.count('tasks/get') - before).toBeGreaterThan(0)
  })

  it('relays what the upstream\'s task asks for, and the answer reaches the upstream', async () => {
    const outcome = await runTask(client, 'u__demo__ask_user', { message: 'Name, please?' })
    expect(textOf(outcome.result)).toBe('Hello, Tess!')
    expect(asked.at(-1)).toMatchObject({ message: 'Name, please?' })
    expect(proxy.count('tasks/update')).toBeGreaterThan(0)
  })

  it('fails a task with the JSON-RPC error its upstream task failed with', async () => {
    const outcome = await runTask(client, 'u__demo__throw_error', { code: -32011, message: 'no such thing' })
    expect(outcome.taskId).toBeDefined()
    await expect(client.experimental.tasks.getTaskResult(outcome.taskId!, CallToolResultSchema)).rejects.toMatchObject({ code: -32011, message: expect.stringContaining('no such thing') })
  })

  it('runs a task as a plain call upstream with resume off', async () => {
    const outcome = await runTask(client, 'p__demo__slow', { duration: 50, steps: 1 })
    expect(textOf(outcome.result)).toBe('slow finished: 1 steps in 50 ms')
    expect(plainProxy.count('tools/call demo__slow')).toBe(1)
    expect(plainProxy.count('tasks/get')).toBe(0)
  })

  it('keeps a plain call a plain call', async () => {
    const before = proxy.count('tasks/get')
    expect(textOf(await client.callTool({ name: 'u__demo__slow', arguments: { duration: 10, steps: 1 } }))).toBe('slow finished: 1 steps in 10 ms')
    expect(proxy.count('tasks/get') - before).toBe(0)
  })

  it('keeps a 2026-07-28 client\'s quick call a plain call answered directly, though the client declares the extension', async () => {
    // The upstream makes every call that declares the extension a task: declared up front, a quick call would be polled.
    const modern = ModernRaw.withTasks(gw.url)
    const call = { name: 'u__demo__slow', arguments: { duration: 10, steps: 1 } }
    // The first call of this client opens its upstream session (the upstream starts a demo server for it): not quick.
    const first = await modern.result('tools/call', call)
    if (first.resultType === 'task') await modern.waitFor(String(first.taskId), ['completed'])
    const before = proxy.count('tasks/get')
    const result = await modern.result('tools/call', call)
    expect(result).toMatchObject({ resultType: 'complete', content: [{ text: 'slow finished: 1 steps in 10 ms' }] })
    expect(proxy.count('tasks/get') - before).toBe(0)
  })

  it('declares the extension on a plain call the upstream runs only as a task, and follows the task', async () => {
    expect(textOf(await client.callTool({ name: 'u__demo__echo', arguments: { text: 'only as a task' } }))).toBe('only as a task')
  })

  it('fails a task whose upstream forgot its task, saying so', async () => {
    const polled = proxy.count('tasks/get')
    const created = await client.experimental.tasks.callToolStream({ name: 'u__demo__slow', arguments: { duration: 5000, steps: 5 } }, undefined, { task: { ttl: 60_000 } })
    const taskId = ((await created[Symbol.asyncIterator]().next()).value as { task: { taskId: string } }).task.taskId
    await until('the upstream task to be followed', async () => proxy.count('tasks/get') > polled ? true : undefined)
    // The upstream restarts on a new memory store, behind the same address: its tasks are gone.
    const forgetful = await startGateway({ upstreams: [demoStdio()], tasks: { decide: 'always' } })
    retired.push(upstream)
    proxy.retarget(forgetful.url)
    upstream = forgetful
    expect(await waitForStatus(client, taskId, ['completed', 'failed'])).toBe('failed')
    const task = await client.experimental.tasks.getTask(taskId)
    expect(task.statusMessage).toMatch(/^upstream 'u' failed on tools\/call 'demo__slow': it no longer knows its task '[^']+'/)
  })

  it('cancels the upstream\'s task when the task is cancelled', async () => {
    const before = proxy.count('tasks/cancel')
    const polled = proxy.count('tasks/get')
    const created = await client.experimental.tasks.callToolStream({ name: 'u__demo__slow', arguments: { duration: 60_000, steps: 60 } }, undefined, { task: { ttl: 60_000 } })
    const first = await created[Symbol.asyncIterator]().next()
    const taskId = (first.value as { task: { taskId: string } }).task.taskId
    await until('the upstream task to be followed', async () => proxy.count('tasks/get') > polled ? true : undefined)
    await client.experimental.tasks.cancelTask(taskId)
    await waitForStatus(client, taskId, ['cancelled'])
    await until('tasks/cancel to reach the upstream', async () => proxy.count('tasks/cancel') > before ? true : undefined)
  })
})
