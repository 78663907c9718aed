import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js'
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  type CallToolResult,
  type CreateMessageResult,
  type ElicitResult,
} from '@modelcontextprotocol/sdk/types.js'
import { REPO_ROOT, startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { textOf } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { legacyTask, RawSession } from '../helpers/raw-session.ts'
import { runTask } from '../helpers/tasks.ts'
import { until } from '../helpers/until.ts'

/** The reference server of the MCP project, installed from the npm registry, over stdio. */
const EVERYTHING = join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')

/** What mcpc 0.2.6 and other task-capable hosts declare: they run sampling and elicitation as tasks of their own. */
const TASK_CAPABLE = {
  sampling: {},
  elicitation: { form: {} },
  roots: { listChanged: true },
  tasks: { list: {}, cancel: {}, requests: { sampling: { createMessage: {} }, elicitation: { create: {} } } },
}

const SAMPLED: CreateMessageResult = { role: 'assistant', content: { type: 'text', text: 'sampled by the client' }, model: 'test-model' }
const ELICITED: ElicitResult = { action: 'accept', content: { name: 'Eve' } }

/** A task-capable SDK v1 client: it keeps tasks in a store, and answers a task-augmented request with a task it completes at once. */
class TaskCapableClient {
  readonly client = new Client({ name: 'client-tasks', version: '1.0.0' }, { capabilities: TASK_CAPABLE, taskStore: new InMemoryTaskStore() })
  /** How often each handler ran, and whether the request it got asked for a task. */
  readonly asked: Array<{ method: string, task: boolean }> = []

  constructor () {
    const client = this.client
    client.setRequestHandler(CreateMessageRequestSchema, async (r, extra) => await this.#answer(r.method, r.params, extra, SAMPLED))
    client.setRequestHandler(ElicitRequestSchema, async (r, extra) => await this.#answer(r.method, r.params, extra, ELICITED))
  }

  async #answer<T extends CreateMessageResult | ElicitResult> (
    method: string,
    params: { task?: { ttl?: number } },
    extra: { taskStore?: { createTask: (o: { ttl?: number }) => Promise<{ taskId: string }>, storeTaskResult: (id: string, s: 'completed', r: T) => Promise<void> } },
    answer: T,
  ): Promise<never> {
    this.asked.push({ method, task: params.task !== undefined })
    if (params.task === undefined || extra.taskStore === undefined) return answer as never
    const store = extra.taskStore
    const task = await store.createTask({ ttl: params.task.ttl ?? 60_000 })
    setImmediate(() => { void store.storeTaskResult(task.taskId, 'completed', answer) })
    return { task } as never
  }

  async connect (transport: Transport): Promise<this> {
    await this.client.connect(transport)
    return this
  }

  /** The tool names once the server has registered those it offers only to clients with some capability. */
  async settledTools (): Promise<string[]> {
    return await until('the capability-dependent tools', async () => {
      const names = (await this.client.listTools()).tools.map((t) => t.name).sort()
      return names.includes('trigger-sampling-request') ? names : undefined
    }, { timeoutMs: 30_000 })
  }
}

/**
 * What a tool of the `*-async` kind reports, without what differs between any two runs made alike: the id of
 * the client's task (the receiver's), how many polls saw it still working (how fast the answer came), and the
 * order of the keys of the JSON it quotes (an SDK v1 client orders the keys of a plain answer by its schema).
 */
function normalised (result: CallToolResult | undefined): { report: string, quoted: unknown } {
  const text = textOf(result)
  const taskId = /Task created: (\S+)/.exec(text)?.[1]
  const plain = taskId === undefined ? text : text.split(taskId).join('<task>')
  const [report = '', quoted] = plain.split('**Result:**\n')
  const lines = report.split('\n').filter((line) => !/^Poll \d+: working/.test(line))
  return { report: lines.join('\n').replace(/^Poll \d+:/gm, 'Poll:'), quoted: quoted === undefined ? undefined : JSON.parse(quoted) }
}

/** How a test reaches server-everything directly, and how the gateway is configured to reach it. */
interface Placement {
  start (): Promise<{ upstream: Record<string, unknown>, direct: () => Transport, close: () => Promise<void> }>
}

const OVER_STDIO: Placement = {
  start: async () => ({
    upstream: { transport: 'stdio', command: process.execPath, args: [EVERYTHING, 'stdio'] },
    direct: () => new StdioClientTransport({ command: process.execPath, args: [EVERYTHING, 'stdio'], stderr: 'ignore' }),
    close: async () => {},
  }),
}

const OVER_HTTP: Placement = {
  start: async () => {
    const everything: StartedUpstream = await startUpstream('test/fixtures/everything-http.mjs', [], { readyTimeoutMs: 60_000 })
    return {
      upstream: { transport: 'streamable-http', url: everything.url },
      direct: () => new StreamableHTTPClientTransport(new URL(everything.url)),
      close: () => everything.close(),
    }
  },
}

// The two placements run side by side (each with its own server and gateway; a placement's tests one after another):
// most of their time is spent waiting on the server's polls of the client's tasks.
describe.concurrent.each([
  ['over stdio', OVER_STDIO],
  ['over Streamable HTTP', OVER_HTTP],
])('server-everything %s, for a client that runs server→client requests as tasks of its own (2025-11-25 client-side tasks)', (_label, placement) => {
  let gw: RunningGateway
  let direct: TaskCapableClient
  let through: TaskCapableClient
  let closeUpstream: (() => Promise<void>) | undefined

  beforeAll(async () => {
    const started = await placement.start()
    closeUpstream = started.close
    gw = await startGateway({
      upstreams: [{ name: 'ev', prefix: '', ...started.upstream, timeouts: { connect: '60s' } }],
      tasks: { pollInterval: '50ms' },
    })
    direct = await new TaskCapableClient().connect(started.direct())
    through = await new TaskCapableClient().connect(new StreamableHTTPClientTransport(new URL(gw.url)))
  }, 90_000)

  afterAll(async () => {
    await direct?.client.close()
    await through?.client.close()
    await gw?.close()
    await closeUpstream?.()
  })

  it.sequential('sees the same tools through the gateway as directly, those offered only to task-capable clients included', { timeout: 60_000 }, async () => {
    const directly = await direct.settledTools()
    expect(directly).toContain('trigger-sampling-request-async')
    expect(directly).toContain('trigger-elicitation-request-async')
    expect(await through.settledTools()).toEqual(directly)
  })

  it.sequential('gets the same result from a tool whose server runs its sampling request as a task of the client, asked once', { timeout: 60_000 }, async () => {
    await through.settledTools()
    const args = { name: 'trigger-sampling-request-async', arguments: { prompt: 'hello', maxTokens: 10 } }
    const askedBefore = [direct.asked.length, through.asked.length]
    const directly = await direct.client.callTool(args) as CallToolResult
    const viaGateway = await through.client.callTool(args) as CallToolResult
    expect(normalised(directly).report).toContain('[COMPLETED]')
    expect(JSON.stringify(normalised(directly).quoted)).toContain('sampled by the client')
    expect(normalised(viaGateway)).toEqual(normalised(directly))
    // The person behind each client was asked once.
    expect(direct.asked.length - askedBefore[0]!).toBe(1)
    expect(through.asked.length - askedBefore[1]!).toBe(1)
  })

  it.sequential('gets the same result from a tool whose server runs its elicitation as a task of the client', { timeout: 60_000 }, async () => {
    await through.settledTools()
    const args = { name: 'trigger-elicitation-request-async', arguments: {} }
    const directly = await direct.client.callTool(args) as CallToolResult
    const viaGateway = await through.client.callTool(args) as CallToolResult
    expect(JSON.stringify(normalised(directly))).toContain('Eve')
    expect(normalised(viaGateway)).toEqual(normalised(directly))
  })

  it.sequential('gets the same result when the call runs as a task of the gateway, the client asked once through the task', { timeout: 60_000 }, async () => {
    await through.settledTools()
    const args = { prompt: 'as a task', maxTokens: 10 }
    const directly = await direct.client.callTool({ name: 'trigger-sampling-request-async', arguments: args }) as CallToolResult
    const askedBefore = through.asked.length
    const outcome = await runTask(through.client, 'trigger-sampling-request-async', args)
    expect(outcome.error).toBeUndefined()
    expect(normalised(outcome.result)).toEqual(normalised(directly))
    expect(through.asked.length - askedBefore).toBe(1)
  })

  it.sequential('completes a task of the gateway whose client was away when the server asked: the client is asked once, when it is back', { timeout: 60_000 }, async () => {
    const args = { prompt: 'while away', maxTokens: 10 }
    const directly = await direct.client.callTool({ name: 'trigger-sampling-request-async', arguments: args }) as CallToolResult
    // A client with no stream open: it creates the task and leaves.
    const away = await RawSession.open(gw.url, TASK_CAPABLE)
    await until('the tool in the session\'s list', async () => {
      const tools = ((await away.request('tools/list')).result as { tools: Array<{ name: string }> }).tools
      return tools.some((t) => t.name === 'trigger-sampling-request-async') ? true : undefined
    })
    const taskId = await legacyTask(away, 'trigger-sampling-request-async', args)
    // The server's request waits in the task's queue (the server meanwhile polls a task of the gateway that is working).
    await away.waitFor(taskId, ['input_required'])
    // Back, on the same session: the queued request is offered on the tasks/result stream, answered, and the task ends.
    const back = await new TaskCapableClient().connect(new StreamableHTTPClientTransport(new URL(gw.url), { sessionId: away.sessionId }))
    try {
      const result = await back.client.request({ method: 'tasks/result', params: { taskId } }, CallToolResultSchema, { timeout: 60_000 })
      expect(normalised(result).quoted).toEqual(normalised(directly).quoted)
      expect(normalised(result).report).toContain('[COMPLETED]')
      expect(back.asked).toEqual([{ method: 'sampling/createMessage', task: false }])
    } finally {
      await back.client.close()
    }
  })
})
