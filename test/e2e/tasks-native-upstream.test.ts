import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { runTask, waitForStatus } from '../helpers/tasks.ts'
import { until } from '../helpers/until.ts'

/**
 * An upstream with native task tools (built with the v1 SDK's own task API): the gateway runs them as
 * upstream tasks behind its own, so the client cannot tell the difference.
 */
describe('upstream tools that only run as tasks', () => {
  let upstream: StartedUpstream
  let gw: RunningGateway
  let client: Client
  const asked: Array<Record<string, unknown>> = []

  beforeAll(async () => {
    upstream = await startUpstream('test/fixtures/native-task-upstream.ts', ['--port', '0'])
    gw = await startGateway({
      tasks: { pollInterval: '50ms' },
      upstreams: [
        { name: 'native', transport: 'streamable-http', url: upstream.url },
        // The same server with its optional task tool kept a plain call upstream.
        { name: 'plain', transport: 'streamable-http', url: upstream.url, tools: { allow: ['native_either'] }, toolSettings: { native_either: { resume: 'off' } } },
      ],
    })
    client = await connectV1(gw.url, {
      onElicit: (params) => {
        asked.push(params)
        return { action: 'accept', content: { approve: true } }
      },
    })
  })

  afterAll(async () => {
    await client?.close()
    await gw?.close()
    await upstream?.close()
  })

  it('runs a native task tool with elicitation as the gateway\'s own task', async () => {
    const outcome = await runTask(client, 'native__native_job', { ms: 50 })
    expect(outcome.error).toBeUndefined()
    expect(textOf(outcome.result)).toContain('approved=true')
    expect(outcome.result?._meta?.['io.modelcontextprotocol/related-task']).toEqual({ taskId: outcome.taskId })
    expect(asked).toHaveLength(1)
    expect((asked[0]?._meta as Record<string, unknown>)['io.modelcontextprotocol/related-task']).toEqual({ taskId: outcome.taskId })
  })

  it('answers a plain call of a native task tool too', async () => {
    const result = await client.callTool({ name: 'native__native_job', arguments: { ms: 10 } })
    expect(textOf(result)).toContain('approved=true')
  })

  it('runs a task of a tool the upstream may run as a task as the upstream\'s own task, and records where it runs', async () => {
    const outcome = await runTask(client, 'native__native_either', { ms: 50 })
    expect(textOf(outcome.result)).toBe('native_either as task=true')
    const timeline = await gw.gateway.store.tasks.timeline(outcome.taskId!)
    expect(timeline.some((event) => event.type === 'status' && event.upstreamTask !== undefined)).toBe(true)
    // A plain call stays a plain call upstream.
    expect(textOf(await client.callTool({ name: 'native__native_either', arguments: { ms: 10 } }))).toBe('native_either as task=false')
  })

  it('keeps a task of such a tool a plain call upstream when resume is off for it', async () => {
    const outcome = await runTask(client, 'plain__native_either', { ms: 10 })
    expect(textOf(outcome.result)).toBe('native_either as task=false')
    const timeline = await gw.gateway.store.tasks.timeline(outcome.taskId!)
    expect(timeline.some((event) => event.type === 'status' && event.upstreamTask !== undefined)).toBe(false)
  })

  it('forwards tasks/cancel to the upstream task', async () => {
    const created = await client.request({ method: 'tools/call', params: { name: 'native__native_slow', arguments: { ms: 30_000, steps: 300 }, task: {} } }, CreateTaskResultSchema)
    const taskId = created.task.taskId
    const statusMessage = await until('the upstream task to report a step', async () => {
      const message = (await client.experimental.tasks.getTask(taskId)).statusMessage
      return message?.startsWith('step') ? message : undefined
    })
    expect(statusMessage).toMatch(/^step \d+\/300$/)
    expect((await client.experimental.tasks.cancelTask(taskId)).status).toBe('cancelled')
    await waitForStatus(client, taskId, ['cancelled'])
    let cancelled: unknown[] = []
    for (let i = 0; i < 100 && cancelled.length === 0; i++) {
      cancelled = JSON.parse(textOf(await client.callTool({ name: 'native__native_cancellations', arguments: {} }))) as unknown[]
    }
    expect(cancelled).toHaveLength(1)
  })
})
