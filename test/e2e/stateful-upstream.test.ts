import { createHash } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { fixture } from '../helpers/built.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { gatewayForSuite, type RunningGateway, startGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { legacyTask, RawSession } from '../helpers/raw-session.ts'
import { runTask } from '../helpers/tasks.ts'

type Json = Record<string, unknown>

const FIXTURE = 'test/fixtures/stateful-upstream.ts'

async function call (client: Client, name: string, args: Json = {}): Promise<string> {
  return textOf(await client.callTool({ name: `s__${name}`, arguments: args }))
}

function modernText (result: Json): string {
  return ((result.content ?? []) as Json[]).map((c) => String(c.text)).join('\n')
}

/**
 * A server that keeps state in memory (a counter and notes; per process over stdio, per Mcp-Session-Id over
 * Streamable HTTP) behind the gateway: each client sees one consistent server of its own, whatever it
 * sends, in both protocol eras, as plain calls and as tasks, and a client with other capabilities gets a
 * session that declares them.
 */
describe.each(['stdio', 'streamable-http'] as const)('a stateful upstream over %s', (transport) => {
  let upstream: StartedUpstream | undefined
  let gw: RunningGateway
  let alice: Client

  beforeAll(async () => {
    const entry: Json = transport === 'stdio'
      ? { name: 's', transport: 'stdio', command: process.execPath, args: [fixture('stateful-upstream')] }
      : { name: 's', transport: 'streamable-http', url: (upstream = await startUpstream(FIXTURE, ['--port', '0'])).url }
    gw = await startGateway({ upstreams: [{ ...entry, maxConcurrentCalls: 32 }], tasks: { pollInterval: '50ms' } })
    alice = await connectV1(gw.url)
  })

  afterAll(async () => {
    await alice?.close()
    await gw?.close()
    await upstream?.close()
  })

  it('refuses resources/subscribe with -32601, as the upstream does, when no upstream offers resource subscriptions', async () => {
    expect(alice.getServerCapabilities()?.resources).toEqual({ listChanged: true })
    await expect(alice.subscribeResource({ uri: 'notes://all' })).rejects.toMatchObject({ code: -32601 })
    await expect(alice.unsubscribeResource({ uri: 'notes://all' })).rejects.toMatchObject({ code: -32601 })
  })

  it('counts on for one client, over sequential and concurrent calls and a task, in one state', async () => {
    for (let i = 1; i <= 5; i++) expect(await call(alice, 'inc')).toBe(String(i))
    const concurrent = await Promise.all(Array.from({ length: 6 }, async () => await call(alice, 'inc')))
    expect(concurrent.map(Number).sort((a, b) => a - b)).toEqual([6, 7, 8, 9, 10, 11])
    const task = await runTask(alice, 's__inc', {})
    expect(task.statuses.at(-1)).toBe('completed')
    expect(textOf(task.result)).toBe('12')
    expect(await call(alice, 'inc')).toBe('13')
  })

  it('shows a note added by one call to the next call and to resources/read', async () => {
    await call(alice, 'add_note', { text: 'buy milk' })
    expect(await call(alice, 'notes')).toBe('buy milk')
    const read = await alice.readResource({ uri: 'notes://all' })
    expect(read.contents).toMatchObject([{ uri: 'notes://all', text: 'buy milk' }])
  })

  it('gives a client with other capabilities its own state, declaring its capabilities, and leaves the first one\'s alone', async () => {
    const bob = await connectV1(gw.url, { onElicit: () => ({ action: 'accept', content: { name: 'Bob' } }), onSample: () => ({ role: 'assistant', content: { type: 'text', text: 'hi' }, model: 'm' }) })
    try {
      expect(await call(bob, 'inc')).toBe('1')
      expect(await call(bob, 'notes')).toBe('')
      const bobView = JSON.parse(await call(bob, 'whoami')) as Json
      expect(bobView.capabilities).toEqual({ elicitation: { form: {}, url: {} }, sampling: {} })
      const aliceView = JSON.parse(await call(alice, 'whoami')) as Json
      expect(aliceView.capabilities).toEqual({})
      expect(aliceView.instance).not.toBe(bobView.instance)
      expect(await call(alice, 'notes')).toBe('buy milk')
      // A tool the server offers only to clients that can be asked: listed and callable for bob only.
      expect((await bob.listTools()).tools.map((t) => t.name)).toContain('s__confirm')
      expect(await call(bob, 'confirm')).toBe('confirmed: accept')
      expect((await alice.listTools()).tools.map((t) => t.name)).not.toContain('s__confirm')
      await expect(alice.callTool({ name: 's__confirm', arguments: {} })).rejects.toThrow(/Unknown tool/)
    } finally {
      await bob.close()
    }
  })

  it('gets two concurrent eliciting tasks of one client their own answers (over HTTP, each shown in its own task)', async () => {
    // Where each question was shown: the task its related-task metadata names.
    const shownIn = new Map<string, string>()
    const dora = await connectV1(gw.url, {
      onElicit: (params) => {
        const related = (params._meta as Json | undefined)?.['io.modelcontextprotocol/related-task'] as Json | undefined
        shownIn.set(String(params.message), String(related?.taskId))
        return { action: 'accept', content: { name: `answer to ${String(params.message)}` } }
      },
    })
    try {
      const [first, second] = await Promise.all([runTask(dora, 's__ask', { question: 'First?' }), runTask(dora, 's__ask', { question: 'Second?' })])
      expect(textOf(first.result)).toBe('First? answer to First?')
      expect(textOf(second.result)).toBe('Second? answer to Second?')
      // Streamable HTTP says which request each question belongs to. Stdio does not (see Upstream sessions):
      // each answer still reaches its own request, but a question may be shown in the client's other task.
      if (transport === 'streamable-http') expect(Object.fromEntries(shownIn)).toEqual({ 'First?': first.taskId, 'Second?': second.taskId })
      else for (const taskId of shownIn.values()) expect([first.taskId, second.taskId]).toContain(taskId)
    } finally {
      await dora.close()
    }
  })

  it('gives a 2026-07-28 client one consistent state of its own, plain and as a task', async () => {
    // Without auth, 2026-07-28 requests that declare the same capabilities come from one client.
    const modern = new ModernRaw(gw.url)
    expect(modernText(await modern.result('tools/call', { name: 's__inc', arguments: {} }))).toBe('1')
    expect(modernText(await modern.result('tools/call', { name: 's__inc', arguments: {} }))).toBe('2')
    const withTasks = ModernRaw.withTasks(gw.url)
    const created = await withTasks.result('tools/call', { name: 's__slow_inc', arguments: { ms: 1500 } })
    expect(created.resultType).toBe('task')
    const task = await withTasks.waitFor(String(created.taskId), ['completed'])
    expect(modernText(task.result as Json)).toBe('3')
    expect(modernText(await modern.result('tools/call', { name: 's__inc', arguments: {} }))).toBe('4')
    const capable = new ModernRaw(gw.url, { elicitation: { form: {} } })
    expect(modernText(await capable.result('tools/call', { name: 's__inc', arguments: {} }))).toBe('1')
  })
})

/** Upstream sessions end with their client, but not before the tasks running on them; and they are bounded. */
describe('upstream sessions of a stateful stdio upstream', () => {
  let gw: RunningGateway
  const token = 'carol-token-0123456789'
  const auth = { authorization: `Bearer ${token}` }

  beforeAll(async () => {
    gw = await startGateway({
      auth: { tokens: [{ principal: 'carol', sha256: createHash('sha256').update(token).digest('hex') }] },
      upstreams: [{ name: 's', transport: 'stdio', command: process.execPath, args: [fixture('stateful-upstream')], maxSessions: 2, maxSessionsPerPrincipal: 2 }],
      tasks: { pollInterval: '50ms' },
    })
  })

  afterAll(async () => {
    await gw?.close()
  })

  const sessions = (): number => gw.gateway.upstreams[0]!.load.sessions

  it('keeps a client\'s session open for its running task after the client ended, then closes it', async () => {
    const first = await RawSession.open(gw.url, {}, auth)
    expect(textOf((await first.request('tools/call', { name: 's__inc' })).result)).toBe('1')
    expect(sessions()).toBe(1)
    const created = await first.request('tools/call', { name: 's__slow_inc', arguments: { ms: 400 }, task: {} })
    const taskId = ((created.result as Json).task as Json).taskId as string
    expect((await fetch(gw.url, { method: 'DELETE', headers: { ...auth, 'mcp-session-id': first.sessionId } })).status).toBe(200)
    // The task goes on in the ended client's state, and the principal fetches its result from a new session.
    const second = await RawSession.open(gw.url, {}, auth)
    expect(textOf((await second.request('tasks/result', { taskId })).result)).toBe('2')
    await vi.waitFor(() => { expect(sessions()).toBe(0) }, { timeout: 10_000, interval: 20 })
  })

  it('makes room beyond maxSessions with the idlest session, and refuses with a precise error while all are in use', async () => {
    const clients = await Promise.all([1, 2, 3].map(async () => await RawSession.open(gw.url, { elicitation: { form: {} } }, auth)))
    const inc = async (i: number): Promise<Json> => await clients[i]!.request('tools/call', { name: 's__inc' })
    expect(textOf((await inc(0)).result)).toBe('1')
    expect(textOf((await inc(1)).result)).toBe('1')
    // Both sessions are idle: the idlest (the first client's) makes room, and its state is gone with it.
    expect(textOf((await inc(2)).result)).toBe('1')
    expect(sessions()).toBe(2)
    expect(textOf((await inc(1)).result)).toBe('2')
    // Tasks waiting for an answer hold both sessions: nothing can make room.
    const asking = await Promise.all([1, 2].map(async (i) => await legacyTask(clients[i]!, 's__ask', { question: 'Who?' })))
    for (const [i, taskId] of asking.entries()) await clients[i + 1]!.waitFor(taskId, ['input_required'])
    const refused = await inc(0)
    expect(refused.error).toMatchObject({
      code: -32059,
      message: expect.stringContaining("upstream 's' already has 2 sessions open, all in use (upstreams[].maxSessions)"),
      data: { code: 'GW_ERR_UPSTREAM_SESSION_LIMIT', upstream: 's', limit: 'maxSessions' },
    })
    // A client that ends gives its session back once its task has ended.
    expect((await fetch(gw.url, { method: 'DELETE', headers: { ...auth, 'mcp-session-id': clients[1]!.sessionId } })).status).toBe(200)
    await clients[2]!.request('tasks/cancel', { taskId: asking[0] })
    await vi.waitFor(() => { expect(sessions()).toBe(1) }, { timeout: 10_000, interval: 20 })
    expect(textOf((await inc(0)).result)).toBe('1')
    await clients[2]!.request('tasks/cancel', { taskId: asking[1] })
  })
})

describe('an upstream session left idle', () => {
  const gw = gatewayForSuite({ upstreams: [{ name: 's', transport: 'stdio', command: process.execPath, args: [fixture('stateful-upstream')], idleTimeout: '1s' }] })

  it('is closed after idleTimeout, and the client\'s next call starts a new state', async () => {
    const client = await connectV1(gw.url)
    try {
      expect(await call(client, 'inc')).toBe('1')
      expect(await call(client, 'inc')).toBe('2')
      await vi.waitFor(() => { expect(gw.gateway.upstreams[0]!.load.sessions).toBe(0) }, { timeout: 10_000, interval: 50 })
      expect(gw.logs().some((line) => line.msg === 'closed an idle upstream session')).toBe(true)
      expect(await call(client, 'inc')).toBe('1')
    } finally {
      await client.close()
    }
  })
})
