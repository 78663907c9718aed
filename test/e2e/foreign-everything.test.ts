import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { runTask } from '../helpers/tasks.ts'

type Json = Record<string, unknown>

/** The reference server of the MCP project, installed from the npm registry, over stdio. */
const EVERYTHING = join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
/** Tools it registers only for a client that declared elicitation, sampling or roots. */
const CONDITIONAL = ['ev__trigger-elicitation-request', 'ev__trigger-sampling-request', 'ev__get-roots-list']
const ROOT = { uri: 'file:///srv/project', name: 'project' }

function modernText (result: Json): string {
  return ((result.content ?? []) as Json[]).map((c) => String(c.text)).join('\n')
}

/**
 * Tools a client lists once the server has settled: it registers its capability-dependent tools after the
 * handshake, announcing each with list_changed, so a client that listed too early is told to list again.
 */
async function settledToolNames (client: Client, wanted: readonly string[]): Promise<string[]> {
  let changed = 0
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++ })
  let names: string[] = []
  await vi.waitFor(async () => {
    names = (await client.listTools()).tools.map((t) => t.name)
    expect(names).toEqual(expect.arrayContaining([...wanted]))
  }, { timeout: 15_000, interval: 100 })
  expect(changed).toBeLessThanOrEqual(2)
  return names
}

describe('@modelcontextprotocol/server-everything behind the gateway', () => {
  let gw: RunningGateway
  let capable: Client
  let incapable: Client
  /** The status of the task an elicitation was asked for, read by the client while it had not answered yet. */
  const taskStatusWhileAsked: string[] = []

  beforeAll(async () => {
    gw = await startGateway({
      upstreams: [{ name: 'ev', transport: 'stdio', command: process.execPath, args: [EVERYTHING, 'stdio'], timeouts: { connect: '60s' } }],
      tasks: { pollInterval: '50ms', decide: 'always' },
    })
    capable = await connectV1(gw.url, {
      onElicit: async (params) => {
        const related = (params._meta as Json | undefined)?.['io.modelcontextprotocol/related-task'] as Json | undefined
        if (typeof related?.taskId === 'string') taskStatusWhileAsked.push((await capable.experimental.tasks.getTask(related.taskId)).status)
        return { action: 'accept', content: { name: 'Eve' } }
      },
      onSample: () => ({ role: 'assistant', content: { type: 'text', text: 'sampled by the client' }, model: 'test-model' }),
      onRoots: () => ({ roots: [ROOT] }),
    })
    incapable = await connectV1(gw.url, { capabilities: {} })
  }, 60_000)

  afterAll(async () => {
    await capable?.close()
    await incapable?.close()
    await gw?.close()
  })

  it('lists its elicitation, sampling and roots tools for a capable client, and not for one without the capabilities', async () => {
    const names = await settledToolNames(capable, CONDITIONAL)
    expect(names).toContain('ev__echo')
    const plain = (await incapable.listTools()).tools.map((t) => t.name)
    expect(plain).toContain('ev__echo')
    for (const name of CONDITIONAL) expect(plain).not.toContain(name)
    await expect(incapable.callTool({ name: 'ev__trigger-elicitation-request', arguments: {} })).rejects.toThrow(/Unknown tool/)
  })

  it('relays what they ask to the client during plain calls', async () => {
    await settledToolNames(capable, CONDITIONAL)
    expect(textOf(await capable.callTool({ name: 'ev__trigger-elicitation-request', arguments: {} }))).toContain('Eve')
    expect(textOf(await capable.callTool({ name: 'ev__trigger-sampling-request', arguments: { prompt: 'hello' } }))).toContain('sampled by the client')
    expect(textOf(await capable.callTool({ name: 'ev__get-roots-list', arguments: {} }))).toContain(ROOT.uri)
  })

  it('runs them as 2025-11-25 tasks, input_required while their requests wait for the client', async () => {
    await settledToolNames(capable, CONDITIONAL)
    const elicited = await runTask(capable, 'ev__trigger-elicitation-request', {})
    // The client may be asked on its GET stream before a poll sees the status: it reads the status itself.
    // (It is asked once: a request offered on the GET stream is not offered again on tasks/result; docs/tasks.md, Rules.)
    expect(taskStatusWhileAsked[0]).toBe('input_required')
    expect(textOf(elicited.result)).toContain('Eve')
    const sampled = await runTask(capable, 'ev__trigger-sampling-request', { prompt: 'as a task' })
    expect(textOf(sampled.result)).toContain('sampled by the client')
  })

  it('answers a 2026-07-28 client\'s calls of them through input rounds (MRTR)', async () => {
    const modern = new ModernRaw(gw.url, { elicitation: { form: {} }, sampling: {} })
    await vi.waitFor(async () => {
      const names = ((await modern.result('tools/list')).tools as Json[]).map((t) => t.name)
      expect(names).toEqual(expect.arrayContaining(CONDITIONAL.slice(0, 2)))
      expect(names).not.toContain('ev__get-roots-list')
    }, { timeout: 15_000, interval: 100 })
    const first = await modern.result('tools/call', { name: 'ev__trigger-elicitation-request', arguments: {} })
    expect(first.resultType).toBe('input_required')
    const [key, request] = Object.entries(first.inputRequests as Json)[0] as [string, Json]
    expect(request.method).toBe('elicitation/create')
    const done = await modern.result('tools/call', { name: 'ev__trigger-elicitation-request', arguments: {}, inputResponses: { [key]: { action: 'accept', content: { name: 'Mo' } } }, requestState: first.requestState })
    expect(done.resultType).toBe('complete')
    expect(modernText(done)).toContain('Mo')
  })

  it('runs them as tasks of the 2026-07-28 tasks extension, input shown in tasks/get and answered with tasks/update', async () => {
    const client = ModernRaw.withTasks(gw.url, { sampling: {} })
    await vi.waitFor(async () => {
      expect(((await client.result('tools/list')).tools as Json[]).map((t) => t.name)).toContain('ev__trigger-sampling-request')
    }, { timeout: 15_000, interval: 100 })
    const created = await client.result('tools/call', { name: 'ev__trigger-sampling-request', arguments: { prompt: 'extension' } })
    expect(created.resultType).toBe('task')
    const taskId = String(created.taskId)
    const waiting = await client.waitFor(taskId, ['input_required'])
    const [key, request] = Object.entries(waiting.inputRequests as Json)[0] as [string, Json]
    expect(request.method).toBe('sampling/createMessage')
    await client.result('tasks/update', { taskId, inputResponses: { [key]: { role: 'assistant', content: { type: 'text', text: 'sampled via tasks/update' }, model: 'm' } } })
    const done = await client.waitFor(taskId, ['completed'])
    expect(modernText(done.result as Json)).toContain('sampled via tasks/update')
  })
})
