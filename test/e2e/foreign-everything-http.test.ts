import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { runTask } from '../helpers/tasks.ts'

/**
 * @modelcontextprotocol/server-everything over Streamable HTTP, as published: a server that keeps a session per
 * client and runs `simulate-research-query` only as a task of its own (taskSupport `required`, four stages of a
 * second), registered only for a client that initialized with it.
 */
describe('@modelcontextprotocol/server-everything over Streamable HTTP behind the gateway', () => {
  let everything: StartedUpstream
  let gw: RunningGateway
  let client: Client

  beforeAll(async () => {
    everything = await startUpstream('test/fixtures/everything-http.mjs', [], { readyTimeoutMs: 60_000 })
    gw = await startGateway({
      upstreams: [{ name: 'ev', transport: 'streamable-http', url: everything.url, timeouts: { connect: '60s' } }],
      tasks: { pollInterval: '50ms' },
    })
    client = await connectV1(gw.url, { onElicit: async () => ({ action: 'accept', content: { interpretation: 'the gateway' } }) })
  }, 90_000)

  afterAll(async () => {
    await client?.close()
    await gw?.close()
    await everything?.close()
  })

  it('runs its native task tool as a task of the gateway, to the upstream task\'s own result', { timeout: 60_000 }, async () => {
    // Listed, as every tool of the gateway, as one that may run as a task or not.
    const tool = (await client.listTools()).tools.find((t) => t.name === 'ev__simulate-research-query')
    expect(tool?.execution).toMatchObject({ taskSupport: 'optional' })
    const outcome = await runTask(client, 'ev__simulate-research-query', { topic: 'durable tasks' })
    expect(outcome.error).toBeUndefined()
    expect(outcome.taskId).toMatch(/.+/)
    expect(outcome.statuses.at(-1)).toBe('completed')
    expect(textOf(outcome.result)).toContain('durable tasks')
  })

  it('relays the elicitation its task asks for to the client, and the answer back to the upstream task', { timeout: 60_000 }, async () => {
    const outcome = await runTask(client, 'ev__simulate-research-query', { topic: 'jaguar', ambiguous: true })
    expect(outcome.error).toBeUndefined()
    // Whether a poll catches the task in input_required depends on how fast the client answers; the report names
    // the interpretation the client gave (a failed elicitation would name a default instead).
    expect(textOf(outcome.result)).toContain('jaguar (the gateway)')
  })

  it('relays the progress of a plain call as the server sent it, with nothing of the gateway\'s own in it', { timeout: 60_000 }, async () => {
    const progress: Array<Record<string, unknown>> = []
    const result = await client.callTool({ name: 'ev__trigger-long-running-operation', arguments: { duration: 1, steps: 3 } }, undefined, {
      onprogress: (params) => { progress.push(params as Record<string, unknown>) },
    })
    expect(textOf(result)).toMatch(/completed/i)
    expect(progress.map((p) => p.progress)).toEqual([1, 2, 3])
    // What the server sent: progress, total and a message; no _meta the server did not write.
    for (const p of progress) expect(JSON.stringify(p)).not.toContain('io.mcp-task-gateway')
  })

  it('answers a plain call of its task-only tool without showing the client the upstream\'s own task', { timeout: 60_000 }, async () => {
    const seen: string[] = []
    const previous = client.fallbackNotificationHandler
    client.fallbackNotificationHandler = async (notification) => { seen.push(JSON.stringify(notification)) }
    try {
      const result = await client.callTool({ name: 'ev__simulate-research-query', arguments: { topic: 'plain call' } })
      expect(textOf(result)).toContain('plain call')
    } finally {
      client.fallbackNotificationHandler = previous
    }
    // The client asked for no task and knows none: no status of a task it never saw, nothing of the gateway's own.
    expect(seen.filter((n) => n.includes('notifications/tasks/status'))).toEqual([])
    expect(seen.filter((n) => n.includes('io.mcp-task-gateway'))).toEqual([])
  })
})
