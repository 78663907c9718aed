import { randomBytes, randomUUID } from 'node:crypto'
import { fetch as undiciFetch } from 'undici'
import { beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { demoStdio, gatewayForSuite } from '../helpers/gateway.ts'
import { ModernRaw, type ModernReply } from '../helpers/modern-raw.ts'
import { legacyTask, next, RawSession, readUntil } from '../helpers/raw-session.ts'
import { readSse } from '../helpers/sse.ts'

type Json = Record<string, unknown>

const ALICE = { authorization: 'Bearer alice-token-0123456789' }
const BOB = { authorization: 'Bearer bob-token-9876543210' }
const ELICIT = { elicitation: { form: {} } }
/** Ids shaped like the gateway's own (task ids, input keys) that name nothing. */
const UNKNOWN_TASK = randomBytes(16).toString('base64url')
const UNKNOWN_INPUT = `in-${randomBytes(16).toString('base64url')}`

/** `value` with every occurrence of `from` replaced by `to`: an unknown id's answer, rewritten for a foreign id. */
function renamed (value: unknown, from: string, to: string): unknown {
  return JSON.parse(JSON.stringify(value).replaceAll(from, to))
}

/** A JSON-RPC message without its id (two requests never share one). */
function withoutId (message: Json): Json {
  const { id: _id, ...rest } = message
  return rest
}

/** Asserts that what came back for a foreign id is exactly what comes back for an unknown one. */
function expectLikeUnknown (foreign: Json, unknown: Json, foreignId: string, unknownId: string, what: string): void {
  expect(unknown.error ?? (unknown.body as Json | undefined)?.error, `${what}: the unknown id is refused`).toBeDefined()
  expect(foreign, what).toEqual(renamed(unknown, unknownId, foreignId))
}

const modernReply = (reply: ModernReply): Json => ({ status: reply.status, body: withoutId(reply.body) })

async function modernTask (client: ModernRaw, name: string, args: Json = {}): Promise<string> {
  const handle = await client.result('tools/call', { name, arguments: args })
  if (handle.resultType !== 'task') throw new Error(`no task created: ${JSON.stringify(handle)}`)
  return String(handle.taskId)
}

/** Opens a 2026-07-28 subscriptions/listen stream asking for notifications about `taskIds`. */
async function listen (
  client: ModernRaw,
  auth: Record<string, string>,
  taskIds: string[],
  signal: AbortSignal,
): Promise<AsyncGenerator<Json>> {
  const res = await undiciFetch(client.url, {
    method: 'POST',
    signal,
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'subscriptions/listen', ...auth },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'subscriptions/listen', params: client.envelope({ notifications: { taskIds } }) }),
  })
  async function * messages (): AsyncGenerator<Json> {
    for await (const event of readSse(res.body as ReadableStream<Uint8Array>)) {
      if (event.data !== '') yield JSON.parse(event.data) as Json
    }
  }
  return messages()
}

/** One raw HTTP exchange on the MCP path with a given session id; an event stream is not read. */
async function exchange (url: string, method: 'POST' | 'GET' | 'DELETE', sessionId: string, auth: Record<string, string>): Promise<{ status: number, body: string }> {
  const controller = new AbortController()
  const res = await undiciFetch(url, {
    method,
    signal: controller.signal,
    headers: { accept: 'application/json, text/event-stream', 'mcp-session-id': sessionId, ...auth, ...(method === 'POST' && { 'content-type': 'application/json' }) },
    ...(method === 'POST' && { body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' }) }),
  })
  const body = (res.headers.get('content-type') ?? '').includes('text/event-stream') ? '(an open event stream)' : await res.text()
  controller.abort()
  return { status: res.status, body }
}

/** The ids of the tasks a legacy session's principal lists. */
async function listed (session: RawSession): Promise<unknown[]> {
  return ((await session.request('tasks/list')).result as { tasks: Json[] }).tasks.map((t) => t.taskId)
}

const mentions = (messages: Json[], ids: string[]): string[] => ids.filter((id) => JSON.stringify(messages).includes(id))
const isElicitation = (m: Json): boolean => m.method === 'elicitation/create'

/** Two principals on one gateway: nothing one of them sends can see or change what belongs to the other. */
describe('isolation between principals', () => {
  const gw = gatewayForSuite({
    upstreams: [demoStdio()],
    auth: { tokens: [{ principal: 'alice', sha256: sha256Hex('alice-token-0123456789') }, { principal: 'bob', sha256: sha256Hex('bob-token-9876543210') }] },
    tasks: { decide: 'always', pollInterval: '50ms' },
    server: { shutdownGrace: '100ms' },
  })

  beforeAll(async () => {
    // Every concurrent call holds its own upstream connection (a spawned demo process): open the three the
    // tests need at once up front, so they wait on the gateway and not on process start-up.
    const warm = new ModernRaw(gw.url, ELICIT, ALICE)
    await Promise.all([1, 2, 3].map(async () => await warm.result('tools/call', { name: 'demo__slow', arguments: { duration: 100, steps: 1 } })))
  })

  it('2025-11-25: bob cannot read, await, cancel, list or answer alice\'s tasks, and they end as if he never tried', async () => {
    const controller = new AbortController()
    const alice = await RawSession.open(gw.url, ELICIT, ALICE)
    const bob = await RawSession.open(gw.url, ELICIT, BOB)
    const bobGet = await bob.stream('get', controller.signal)
    const asking = await legacyTask(alice, 'demo__ask_user', { message: 'Alice?' })
    const aliceStream = await alice.stream({ taskResult: asking }, controller.signal)
    const input = String((await next(aliceStream, isElicitation)).id)
    await alice.waitFor(asking, ['input_required'])
    const slow = await legacyTask(alice, 'demo__slow', { duration: 60_000, steps: 1 })
    const snapshot = async (): Promise<unknown[]> => [(await alice.request('tasks/get', { taskId: slow })).result, (await alice.request('tasks/get', { taskId: asking })).result]
    const before = await snapshot()
    expect(before).toMatchObject([{ status: 'working' }, { status: 'input_required' }])

    const probe = async (): Promise<void> => {
      for (const taskId of [slow, asking]) {
        for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
          const foreign = withoutId(await bob.request(method, { taskId }))
          expectLikeUnknown(foreign, withoutId(await bob.request(method, { taskId: UNKNOWN_TASK })), taskId, UNKNOWN_TASK, method)
        }
      }
      expect((await listed(bob)).filter((id) => id === slow || id === asking)).toEqual([])
    }
    await probe()
    const answer = (id: string, name: string): Json => ({ jsonrpc: '2.0', id, result: { action: 'accept', content: { name } } })
    const stolen = await bob.post(answer(input, 'Mallory'))
    const unknown = await bob.post(answer(UNKNOWN_INPUT, 'Mallory'))
    expect(stolen.status).toBe(400)
    expect(stolen.status).toBe(unknown.status)
    expectLikeUnknown(await stolen.json() as Json, await unknown.json() as Json, input, UNKNOWN_INPUT, 'a response to alice\'s input request')

    expect(await snapshot()).toEqual(before)
    // Alice can still do what bob could not: answer her input and cancel her slow task.
    expect((await alice.post(answer(input, 'Alice'))).status).toBe(202)
    const outcome = await next(aliceStream, (m) => 'result' in m || 'error' in m)
    expect(outcome.result).toMatchObject({ content: [{ type: 'text', text: 'Hello, Alice!' }] })
    expect((await alice.request('tasks/cancel', { taskId: slow })).result).toMatchObject({ status: 'cancelled' })
    const after = await snapshot()
    expect(after).toMatchObject([{ status: 'cancelled' }, { status: 'completed' }])

    // Ended tasks are just as unreachable, and bob's second round changes nothing either.
    await probe()
    expect(await snapshot()).toEqual(after)
    expect((await alice.request('tasks/result', { taskId: asking })).result).toEqual(outcome.result)

    // Bob's own task's last notification on his GET stream comes after everything alice's tasks did.
    const own = await legacyTask(bob, 'demo__echo', { text: 'mine' })
    const seen = await readUntil(bobGet, (m) => m.method === 'notifications/tasks/status' && (m.params as Json).taskId === own && (m.params as Json).status === 'completed')
    expect(mentions(seen, [slow, asking, input])).toEqual([])
    controller.abort()
  })

  it('2025-11-25: bob cannot use alice\'s session id on POST, GET or DELETE, and her session keeps working', async () => {
    const alice = await RawSession.open(gw.url, ELICIT, ALICE)
    for (const method of ['POST', 'GET', 'DELETE'] as const) {
      const unknown = await exchange(gw.url, method, randomUUID(), BOB)
      expect(unknown.status, method).toBe(404)
      expect(await exchange(gw.url, method, alice.sessionId, BOB), method).toEqual(unknown)
      // The session a modern request of alice's is handled under is no legacy session either.
      expect(await exchange(gw.url, method, 'modern:alice', BOB), method).toEqual(unknown)
    }
    expect(((await alice.request('tools/list')).result as { tools: Json[] }).tools.length).toBeGreaterThan(0)
    expect((await exchange(gw.url, 'GET', alice.sessionId, ALICE)).body).toBe('(an open event stream)')
    // Alice's own DELETE does end it: bob's was refused, not ignored.
    expect((await exchange(gw.url, 'DELETE', alice.sessionId, ALICE)).status).toBe(200)
    expect((await exchange(gw.url, 'POST', alice.sessionId, ALICE)).status).toBe(404)
  })

  it('2026-07-28: bob cannot read, update, cancel or listen to alice\'s tasks, and they end as if he never tried', async () => {
    const controller = new AbortController()
    const alice = ModernRaw.withTasks(gw.url, ELICIT, ALICE)
    const bob = ModernRaw.withTasks(gw.url, ELICIT, BOB)
    const asking = await modernTask(alice, 'demo__ask_user', { message: 'Alice?' })
    const [key] = Object.keys((await alice.waitFor(asking, ['input_required'])).inputRequests as Json)
    if (key === undefined) throw new Error('alice\'s task asks for nothing')
    const mine = await modernTask(bob, 'demo__ask_user', { message: 'Bob?' })
    const [bobKey] = Object.keys((await bob.waitFor(mine, ['input_required'])).inputRequests as Json)
    const slow = await modernTask(alice, 'demo__slow', { duration: 60_000, steps: 1 })
    const snapshot = async (): Promise<Json[]> => [await alice.result('tasks/get', { taskId: slow }), await alice.result('tasks/get', { taskId: asking })]
    const before = await snapshot()
    expect(before).toMatchObject([{ status: 'working' }, { status: 'input_required' }])

    // A listen naming alice's tasks is granted exactly what one naming an unknown task is: bob's own task only.
    const bobListen = await listen(bob, BOB, [slow, asking, mine], controller.signal)
    const unknownListen = await listen(bob, BOB, [UNKNOWN_TASK, mine], controller.signal)
    const ack = (await bobListen.next()).value as Json
    expect(ack).toMatchObject({ method: 'notifications/subscriptions/acknowledged', params: { notifications: { taskIds: [mine] } } })
    expect(ack).toEqual((await unknownListen.next()).value)

    const mallory = { [key]: { action: 'accept', content: { name: 'Mallory' } } }
    const probe = async (): Promise<void> => {
      for (const taskId of [slow, asking]) {
        for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
          const params = method === 'tasks/update' ? { inputResponses: mallory } : {}
          const foreign = modernReply(await bob.request(method, { ...params, taskId }))
          const unknown = modernReply(await bob.request(method, { ...params, taskId: UNKNOWN_TASK }))
          expectLikeUnknown(foreign, unknown, taskId, UNKNOWN_TASK, method)
        }
      }
    }
    await probe()
    // Alice's input key sent along with bob's own task is ignored, like any key that is not his.
    expect(await bob.result('tasks/update', { taskId: mine, inputResponses: mallory })).toEqual({ resultType: 'complete' })
    expect(await bob.result('tasks/get', { taskId: mine })).toMatchObject({ status: 'input_required', inputRequests: { [String(bobKey)]: { method: 'elicitation/create' } } })

    expect(await snapshot()).toEqual(before)
    // Alice can still do what bob could not: answer her input and cancel her slow task.
    await alice.result('tasks/update', { taskId: asking, inputResponses: { [key]: { action: 'accept', content: { name: 'Alice' } } } })
    await alice.result('tasks/cancel', { taskId: slow })
    const after = [await alice.waitFor(slow, ['cancelled']), await alice.waitFor(asking, ['completed'])]
    expect(after[1]).toMatchObject({ result: { content: [{ type: 'text', text: 'Hello, Alice!' }] } })
    await probe()
    expect(await snapshot()).toEqual(after)

    // Bob's own task completing is the last thing his stream carries; nothing about alice's tasks came before.
    await bob.result('tasks/update', { taskId: mine, inputResponses: { [String(bobKey)]: { action: 'accept', content: { name: 'Bob' } } } })
    const seen = await readUntil(bobListen, (m) => m.method === 'notifications/tasks' && (m.params as Json).taskId === mine && (m.params as Json).status === 'completed')
    expect(mentions(seen, [slow, asking, key])).toEqual([])
    controller.abort()
  })

  it('2026-07-28: bob cannot resume alice\'s synchronous call with her requestState, and her own retry still works', async () => {
    const alice = new ModernRaw(gw.url, ELICIT, ALICE)
    const bob = new ModernRaw(gw.url, ELICIT, BOB)
    const call = { name: 'demo__ask_user', arguments: { message: 'Sync?' } }
    const round = await alice.result('tools/call', call)
    expect(round).toMatchObject({ resultType: 'input_required', requestState: expect.any(String) })
    const [key] = Object.keys(round.inputRequests as Json)
    const state = String(round.requestState)
    const retry = (requestState: string, name: string): Json => ({ ...call, requestState, inputResponses: { [String(key)]: { action: 'accept', content: { name } } } })

    // Baselines: a state bob forged by rewriting alice's to name him, and a genuine state of bob's whose call already finished.
    const [payload, mac] = state.split('.')
    const claims = JSON.parse(Buffer.from(String(payload), 'base64url').toString('utf8')) as Json
    const forgedState = `${Buffer.from(JSON.stringify({ ...claims, p: 'bob' })).toString('base64url')}.${String(mac)}`
    const forged = await bob.request('tools/call', retry(forgedState, 'Mallory'))
    const own = await bob.result('tools/call', call)
    const [ownKey] = Object.keys(own.inputRequests as Json)
    expect(await bob.result('tools/call', { ...call, requestState: own.requestState, inputResponses: { [String(ownKey)]: { action: 'decline' } } })).toMatchObject({ resultType: 'complete' })
    const stale = await bob.request('tools/call', retry(String(own.requestState), 'Mallory'))

    const stolen = await bob.request('tools/call', retry(state, 'Mallory'))
    expect(stolen.status).toBe(forged.status)
    expect((stolen.body.error as Json | undefined)?.code).toBe((forged.body.error as Json).code)
    expect(modernReply(stolen)).toEqual(modernReply(stale))

    expect(await alice.result('tools/call', retry(state, 'Alice'))).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'Hello, Alice!' }] })
  })

  it('neither era lets bob reach a task alice created in the other', async () => {
    const aliceLegacy = await RawSession.open(gw.url, ELICIT, ALICE)
    const aliceModern = ModernRaw.withTasks(gw.url, ELICIT, ALICE)
    const bobLegacy = await RawSession.open(gw.url, ELICIT, BOB)
    const bobModern = ModernRaw.withTasks(gw.url, ELICIT, BOB)
    const legacyTaskId = await legacyTask(aliceLegacy, 'demo__ask_user', { message: 'Legacy?' })
    const modernTaskId = await modernTask(aliceModern, 'demo__ask_user', { message: 'Modern?' })
    await aliceLegacy.waitFor(legacyTaskId, ['input_required'])
    const [modernKey] = Object.keys((await aliceModern.waitFor(modernTaskId, ['input_required'])).inputRequests as Json)
    if (modernKey === undefined) throw new Error('alice\'s modern task asks for nothing')
    // Alice herself reaches each task from the other era.
    const snapshot = async (): Promise<Json[]> => [await aliceModern.result('tasks/get', { taskId: legacyTaskId }), (await aliceLegacy.request('tasks/get', { taskId: modernTaskId })).result as Json]
    const before = await snapshot()
    expect(before).toMatchObject([{ status: 'input_required' }, { status: 'input_required' }])

    for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
      const foreign = modernReply(await bobModern.request(method, { taskId: legacyTaskId }))
      expectLikeUnknown(foreign, modernReply(await bobModern.request(method, { taskId: UNKNOWN_TASK })), legacyTaskId, UNKNOWN_TASK, `modern ${method}`)
    }
    for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
      const foreign = withoutId(await bobLegacy.request(method, { taskId: modernTaskId }))
      expectLikeUnknown(foreign, withoutId(await bobLegacy.request(method, { taskId: UNKNOWN_TASK })), modernTaskId, UNKNOWN_TASK, `legacy ${method}`)
    }
    expect((await listed(bobLegacy)).filter((id) => id === legacyTaskId || id === modernTaskId)).toEqual([])
    const answer = (id: string, name: string): Json => ({ jsonrpc: '2.0', id, result: { action: 'accept', content: { name } } })
    const stolen = await bobLegacy.post(answer(modernKey, 'Mallory'))
    const unknown = await bobLegacy.post(answer(UNKNOWN_INPUT, 'Mallory'))
    expect(stolen.status).toBe(unknown.status)
    expectLikeUnknown(await stolen.json() as Json, await unknown.json() as Json, modernKey, UNKNOWN_INPUT, 'a legacy response to alice\'s modern input')

    expect(await snapshot()).toEqual(before)
    // Alice answers her modern task the legacy way, and it completes with her answer.
    expect((await aliceLegacy.post(answer(modernKey, 'Alice'))).status).toBe(202)
    expect(await aliceModern.waitFor(modernTaskId, ['completed'])).toMatchObject({ result: { content: [{ text: 'Hello, Alice!' }] } })
    expect(await aliceModern.result('tasks/cancel', { taskId: legacyTaskId })).toEqual({ resultType: 'complete' })
    expect((await aliceLegacy.waitFor(legacyTaskId, ['cancelled'])).status).toBe('cancelled')
  })
})
