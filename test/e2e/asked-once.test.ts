import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ElicitRequestSchema, ListRootsRequestSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { REPO_ROOT, startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { fixture } from '../helpers/built.ts'
import { textOf } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { legacyTask, next, RawSession } from '../helpers/raw-session.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const EVERYTHING = join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
const ROOT = { uri: 'file:///srv/project', name: 'project' }

/** An SDK v1 client that declares roots and counts how often it is asked for them, and what it was refused. */
interface RootsClient {
  client: Client
  asked: () => number
  /** The errors the client met, such as an answer the gateway refused (-32600, "no request with id … is waiting"). */
  errors: string[]
}

async function rootsClient (url: string): Promise<RootsClient> {
  let asked = 0
  const errors: string[] = []
  const client = new Client({ name: 'roots-client', version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } })
  client.setRequestHandler(ListRootsRequestSchema, () => {
    asked++
    return { roots: [ROOT] }
  })
  client.onerror = (err) => { errors.push(err.message) }
  await client.connect(new StreamableHTTPClientTransport(new URL(url)))
  return { client, asked: () => asked, errors }
}

describe('a request of the upstream tied to no call is asked once and answered once', () => {
  let http: StartedUpstream
  /** The fixture over stdio and over Streamable HTTP, each behind a gateway of its own. */
  const gateways: Record<string, RunningGateway> = {}

  beforeAll(async () => {
    http = await startUpstream('test/fixtures/stateful-upstream.ts', ['--port', '0'])
    gateways.stdio = await startGateway({ upstreams: [{ name: 'st', transport: 'stdio', command: process.execPath, args: [fixture('stateful-upstream')] }] })
    gateways['Streamable HTTP'] = await startGateway({ upstreams: [{ name: 'st', transport: 'streamable-http', url: http.url }] })
  }, 60_000)

  afterAll(async () => {
    for (const gw of Object.values(gateways)) await gw.close()
    await http?.close()
  })

  for (const transport of ['stdio', 'Streamable HTTP']) {
    it(`${transport}: a request the server sends during a short call, not for it, reaches the client once; its answer is taken`, async () => {
      const { client, asked, errors } = await rootsClient(gateways[transport]!.url)
      try {
        // The server asks for the roots on its own (tied to no call) and answers the call at once, without waiting.
        expect(textOf(await client.callTool({ name: 'st__ask_aside', arguments: {} }))).toBe('asked')
        const ended = await until('the server hearing how its roots/list ended', async () => {
          const seen = JSON.parse(textOf(await client.callTool({ name: 'st__asked_aside', arguments: {} }))) as { answers: number, failures: number }
          return seen.answers + seen.failures > 0 ? seen : undefined
        })
        expect(ended).toEqual({ answers: 1, failures: 0 })
        expect(asked()).toBe(1)
        expect(errors).toEqual([])
      } finally {
        await client.close()
      }
    })
  }
})

describe.each(['stdio', 'Streamable HTTP'])('@modelcontextprotocol/server-everything over %s asking for roots as each session opens, while short calls run', (transport) => {
  let gw: RunningGateway
  let everything: StartedUpstream | undefined

  beforeAll(async () => {
    if (transport === 'stdio') {
      gw = await startGateway({ upstreams: [{ name: 'ev', transport: 'stdio', command: process.execPath, args: [EVERYTHING, 'stdio'], timeouts: { connect: '60s' } }] })
      return
    }
    everything = await startUpstream('test/fixtures/everything-http.mjs', [], { readyTimeoutMs: 60_000 })
    gw = await startGateway({ upstreams: [{ name: 'ev', transport: 'streamable-http', url: everything.url }] })
  }, 90_000)

  afterAll(async () => {
    await gw?.close()
    await everything?.close()
  })

  /**
   * One session: calls `echo` again and again from the start until the client is asked for its roots (the server
   * asks 350 ms after the upstream session opened, so most likely while an echo runs), then waits until the server
   * has them and returns how often the client was asked.
   */
  async function session (): Promise<{ asked: number, errors: string[] }> {
    const { client, asked, errors } = await rootsClient(gw.url)
    try {
      const updated = new Promise<void>((resolve) => {
        client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
          if (String(n.params.data).startsWith('Roots updated')) resolve()
        })
      })
      const roots = { updated: false }
      void updated.then(() => { roots.updated = true })
      // At most 2000 calls: a request that never comes fails the count below instead of running on.
      for (let calls = 0; calls < 2000 && asked() === 0 && !roots.updated; calls++) {
        await client.callTool({ name: 'ev__echo', arguments: { message: 'short' } })
      }
      if (asked() > 0) await updated
      return { asked: asked(), errors: [...errors] }
    } finally {
      await client.close()
    }
  }

  /** `batches` of five sessions at once. */
  async function sessions (batches: number): Promise<Array<{ asked: number, errors: string[] }>> {
    const outcomes: Array<{ asked: number, errors: string[] }> = []
    for (let batch = 0; batch < batches; batch++) {
      outcomes.push(...await Promise.all(Array.from({ length: 5 }, async () => await session())))
    }
    return outcomes
  }

  // Each session is a trial of its own, and the ask lands while an echo runs in most of them: a client asked twice
  // (or an answer refused) would show in most of 20 sessions as it would in most of 50, at two fifths of the
  // upstream sessions (over stdio, a server process each) and of the echo calls.
  it('20 sessions, five at a time: each client is asked exactly once, and no answer is refused', { timeout: 180_000 }, async () => {
    const outcomes = await sessions(4)
    expect(outcomes.map((o) => o.asked)).toEqual(Array(20).fill(1))
    expect(outcomes.flatMap((o) => o.errors)).toEqual([])
  })
})

describe('a queued input of a 2025-11-25 task is offered once per client', () => {
  let gw: RunningGateway

  beforeAll(async () => {
    gw = await startGateway({
      upstreams: [
        { name: 'ev', transport: 'stdio', command: process.execPath, args: [EVERYTHING, 'stdio'], timeouts: { connect: '60s' } },
        { name: 'st', transport: 'stdio', command: process.execPath, args: [fixture('stateful-upstream')] },
      ],
      tasks: { pollInterval: '50ms' },
    })
  }, 60_000)

  afterAll(async () => {
    await gw?.close()
  })

  it('an SDK v1 client running a task with callToolStream, answering only once it polled input_required and opened tasks/result, is asked once', { timeout: 60_000 }, async () => {
    let resultOpened!: () => void
    const opened = new Promise<void>((resolve) => { resultOpened = resolve })
    let inputSeen!: () => void
    const seen = new Promise<void>((resolve) => { inputSeen = resolve })
    // The client's own fetch: tells when its tasks/result request has been answered with a stream.
    const watching: typeof fetch = async (url, init) => {
      const res = await fetch(url, init)
      if (typeof init?.body === 'string' && init.body.includes('"method":"tasks/result"')) resultOpened()
      return res
    }
    const client = new Client({ name: 'polling-client', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } })
    const errors: string[] = []
    client.onerror = (err) => { errors.push(err.message) }
    let asked = 0
    client.setRequestHandler(ElicitRequestSchema, async () => {
      asked++
      // The person answers only after the client saw input_required and opened tasks/result, and one more round
      // trip later (the gateway has attached that stream by then).
      await seen
      await opened
      await client.listTools()
      return { action: 'accept', content: { name: 'Once' } }
    })
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.url), { fetch: watching }))
    try {
      await until('the elicitation tool listed', async () => (await client.listTools()).tools.some((t) => t.name === 'ev__trigger-elicitation-request') || undefined)
      const statuses: string[] = []
      let result: unknown
      const stream = client.experimental.tasks.callToolStream({ name: 'ev__trigger-elicitation-request', arguments: {} }, undefined, { task: { ttl: 60_000 }, timeout: 60_000 })
      for await (const message of stream) {
        if (message.type === 'taskStatus') {
          statuses.push(message.task.status)
          if (message.task.status === 'input_required') inputSeen()
        }
        if (message.type === 'result') result = message.result
        if (message.type === 'error') throw message.error
      }
      expect(statuses).toContain('input_required')
      expect(textOf(result)).toContain('Once')
      expect(asked).toBe(1)
      expect(errors).toEqual([])
    } finally {
      await client.close()
    }
  })

  it('an input offered on the GET stream is not offered again on tasks/result while that stream is open', { timeout: 30_000 }, async () => {
    const session = await RawSession.open(gw.url)
    const streams = new AbortController()
    try {
      const get = await session.stream('get', streams.signal)
      const taskId = await legacyTask(session, 'st__ask', { question: 'who?' })
      const offered = await next(get, (m) => m.method === 'elicitation/create')
      await session.waitFor(taskId, ['input_required'])
      const result = await session.stream({ taskResult: taskId }, streams.signal)
      const answered = await session.post({ jsonrpc: '2.0', id: offered.id, result: { action: 'accept', content: { name: 'Ada' } } })
      expect(answered.status).toBe(202)
      const first = await next(result, () => true)
      // The first thing on tasks/result is the task's result, not the same request again.
      expect(first.method).toBeUndefined()
      expect(textOf(first.result)).toBe('who? Ada')
    } finally {
      streams.abort()
      await session.close()
    }
  })

  it('an input offered on a stream that closed unanswered is offered again, with the same id, on the next stream', { timeout: 30_000 }, async () => {
    const session = await RawSession.open(gw.url)
    const first = new AbortController()
    const second = new AbortController()
    try {
      const taskId = await legacyTask(session, 'st__ask', { question: 'who?' })
      await session.waitFor(taskId, ['input_required'])
      const lost = await session.stream({ taskResult: taskId }, first.signal)
      const offered = await next(lost, (m) => m.method === 'elicitation/create')
      first.abort()
      const again = await session.stream({ taskResult: taskId }, second.signal)
      const reoffered = await next(again, (m) => m.method === 'elicitation/create')
      expect(reoffered.id).toBe(offered.id)
      expect((await session.post({ jsonrpc: '2.0', id: offered.id, result: { action: 'accept', content: { name: 'Bo' } } })).status).toBe(202)
      const done = await next(again, (m) => m.method === undefined)
      expect(textOf((done as Json).result)).toBe('who? Bo')
    } finally {
      second.abort()
      await session.close()
    }
  })
})
