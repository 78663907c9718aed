// Revocation bites at once: a reload that removes or rotates a bearer token, or narrows what it grants, ends
// every stream and held exchange opened with it before the reload is answered, and nothing the gateway sends
// later reaches them. The gateway runs in the test's process; reloads go through POST /admin/reload.
import { writeFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fetch as undiciFetch } from 'undici'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { loadConfig } from '../../src/config/load.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { JwksServer, startOAuthGateway, type SigningKey } from '../helpers/jwks-server.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { writeConfig } from '../helpers/process.ts'
import { legacyTask, next, RawSession } from '../helpers/raw-session.ts'
import { readSse } from '../helpers/sse.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const ADMIN_TOKEN = 'admin-token-5e0c2a7d91'
const T1 = 'alice-first-token-0123456789'
const T2 = 'alice-second-token-0123456789'
const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` })
const ELICIT = { elicitation: { form: {} } }
/** Rules of the one scope alice's tokens carry: every upstream, or a few tools of the demo. */
const ALL_RULE = { scope: 'all', upstreams: ['*'] }
const ASK_RULE = { scope: 'all', tools: ['demo__ask_user', 'demo__slow'] }
const ECHO_RULE = { scope: 'all', tools: ['demo__echo'] }

interface Auth {
  tokens: Array<{ principal: string, sha256: string, scopes: string[] }>
  permissions: Json[]
}

const alice = (...tokens: string[]): Auth['tokens'] => tokens.map((token) => ({ principal: 'alice', sha256: sha256Hex(token), scopes: ['all'] }))

function configuration (auth: Auth): Json {
  return {
    store: { kind: 'memory' },
    server: { port: 0 },
    tasks: { decide: 'always', pollInterval: '50ms' },
    auth,
    admin: { port: 0, tokenSha256: sha256Hex(ADMIN_TOKEN) },
    upstreams: [demoStdio({ resources: { deny: ['*'] } })],
  }
}

/** What a stream carried until it ended, or until a message `stop` accepts arrived (then `ended` is false). */
async function rest (stream: AsyncGenerator<Json>, stop: (message: Json) => boolean): Promise<{ ended: boolean, messages: Json[] }> {
  const messages: Json[] = []
  for (;;) {
    const { value, done } = await stream.next()
    if (done) return { ended: true, messages }
    messages.push(value)
    if (stop(value)) return { ended: false, messages }
  }
}

const isElicitation = (message: Json): boolean => message.method === 'elicitation/create'
const isQuestion = (message: Json): boolean => isElicitation(message) || message.method === 'sampling/createMessage'

/** The messages of an SSE response, one at a time. */
async function * messagesOf (res: Response | Awaited<ReturnType<typeof undiciFetch>>): AsyncGenerator<Json> {
  for await (const event of readSse(res.body as ReadableStream<Uint8Array>)) {
    if (event.data !== '') yield JSON.parse(event.data) as Json
  }
}

/** A 2026-07-28 subscriptions/listen stream, read message by message. */
async function listen (client: ModernRaw, token: string, notifications: Json, signal: AbortSignal): Promise<AsyncGenerator<Json>> {
  const res = await undiciFetch(client.url, {
    method: 'POST',
    signal,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'subscriptions/listen',
      ...bearer(token),
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'subscriptions/listen', params: client.envelope({ notifications }) }),
  })
  if (res.status !== 200) throw new Error(`subscriptions/listen: HTTP ${res.status} ${await res.text()}`)
  async function * messages (): AsyncGenerator<Json> {
    for await (const event of readSse(res.body as ReadableStream<Uint8Array>)) {
      if (event.data !== '') yield JSON.parse(event.data) as Json
    }
  }
  return messages()
}

describe('revocation: a reload ends what a removed, rotated or narrowed token holds', () => {
  let file: string
  let gw: RunningGateway
  const aborts: AbortController[] = []

  const streamSignal = (): AbortSignal => {
    const controller = new AbortController()
    aborts.push(controller)
    return controller.signal
  }

  /** Writes the configuration with `auth` and puts it in force through the admin API. */
  async function reload (auth: Auth): Promise<void> {
    writeFileSync(file, JSON.stringify(configuration(auth)))
    const admin = gw.gateway.admin!
    const response = await admin.inject({ method: 'POST', url: '/admin/reload', headers: bearer(ADMIN_TOKEN) })
    if (response.statusCode !== 200) throw new Error(`reload failed: ${response.body}`)
  }

  /** The same legacy session, authenticated with another token. */
  function withToken (session: RawSession, token: string): RawSession {
    const other = new RawSession(gw.url, bearer(token))
    other.sessionId = session.sessionId
    return other
  }

  beforeAll(async () => {
    const config = configuration({ tokens: alice(T1), permissions: [ALL_RULE] })
    file = writeConfig(JSON.stringify(config))
    gw = await startGateway(config, {}, { configSource: () => loadConfig(file) })
  })

  afterAll(async () => {
    for (const controller of aborts) controller.abort()
    await gw?.close()
  })

  it('ends the GET stream of a removed token, and tasks started with the new token never ask on it', async () => {
    await reload({ tokens: alice(T1), permissions: [ALL_RULE] })
    const first = await RawSession.open(gw.url, { ...ELICIT, sampling: {} }, bearer(T1))
    const stream = await first.stream('get', streamSignal())

    await reload({ tokens: alice(T2), permissions: [ALL_RULE] })
    // The session is alice's: her new token may use it, and starts tasks that ask her for a PIN and her model for a summary.
    const second = withToken(first, T2)
    const pin = await legacyTask(second, 'demo__ask_user', { message: 'PIN?' })
    const summary = await legacyTask(second, 'demo__summarize', { text: 'the quarterly figures' })
    await second.waitFor(pin, ['input_required'])
    await second.waitFor(summary, ['input_required'])

    expect(await rest(stream, isQuestion)).toEqual({ ended: true, messages: [] })
    expect((await first.post({ jsonrpc: '2.0', id: 9, method: 'tools/list' })).status).toBe(401)
    expect(gw.logs().some((l) => l.msg === 'configuration reload: ended 1 streams and held exchanges whose credential was revoked or narrowed')).toBe(true)

    // A GET stream of the new token is offered both questions, and the answers reach the tasks.
    const fresh = await second.stream('get', streamSignal())
    const questions = new Map<unknown, Json>()
    while (questions.size < 2) {
      const question = await next(fresh, isQuestion)
      questions.set(question.method, question)
    }
    const elicitation = questions.get('elicitation/create')!
    expect((elicitation.params as Json).message).toBe('PIN?')
    await (await second.post({ jsonrpc: '2.0', id: elicitation.id as string, result: { action: 'accept', content: { name: '1234' } } })).text()
    const sampling = questions.get('sampling/createMessage')!
    const summaryText = { role: 'assistant', content: { type: 'text', text: 'figures' }, model: 'test-model' }
    await (await second.post({ jsonrpc: '2.0', id: sampling.id as string, result: summaryText })).text()
    expect(await second.waitFor(pin, ['completed'])).toMatchObject({ status: 'completed' })
    expect(await second.waitFor(summary, ['completed'])).toMatchObject({ status: 'completed' })
  })

  it('answers a synchronous call relaying a question on a removed token\'s stream with the revocation, and withdraws the question', async () => {
    await reload({ tokens: alice(T1, T2), permissions: [ALL_RULE] })
    const first = await RawSession.open(gw.url, ELICIT, bearer(T1))
    const res = await first.post({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'demo__ask_user', arguments: { message: 'PIN?' } } })
    const stream = messagesOf(res)
    const question = await next(stream, isElicitation)

    await reload({ tokens: alice(T2), permissions: [ALL_RULE] })

    // Without revocation the answer of alice's other token would reach the call, and its result this stream.
    const answer = await withToken(first, T2).post({ jsonrpc: '2.0', id: question.id as string, result: { action: 'accept', content: { name: '1234' } } })
    expect(answer.status).toBe(400)
    await answer.text()
    const tail = await rest(stream, (message) => 'result' in message)
    expect(tail.ended).toBe(true)
    expect(tail.messages.at(-1)).toMatchObject({ id: 5, error: { code: -32001, message: expect.stringContaining('was revoked') } })
  })

  it('answers a blocking tasks/result held with a removed token with an error saying so, and ends its stream', async () => {
    await reload({ tokens: alice(T1, T2), permissions: [ALL_RULE] })
    const first = await RawSession.open(gw.url, ELICIT, bearer(T1))
    const taskId = await legacyTask(first, 'demo__slow', { duration: 20_000, steps: 2 })
    // The stream is open (and the wait registered) once its head arrived.
    const waiting = await first.stream({ taskResult: taskId }, streamSignal())

    await reload({ tokens: alice(T2), permissions: [ALL_RULE] })

    // Without revocation the stream would carry the task's result once the tool ends.
    const tail = await rest(waiting, (message) => 'result' in message)
    expect(tail).toEqual({
      ended: true,
      messages: [{
        jsonrpc: '2.0',
        id: expect.any(Number),
        error: {
          code: -32001,
          message: 'Unauthorized: the credential this exchange was opened with was revoked: a configuration reload removed or rotated it; authenticate again',
          data: { code: 'GW_ERR_AUTH_REVOKED' },
        },
      }],
    })
    // The task itself is alice's and goes on: her other token reads it.
    const second = withToken(first, T2)
    expect(await second.waitFor(taskId, ['working', 'completed'])).toMatchObject({ taskId })
    await second.request('tasks/cancel', { taskId })
  })

  it('ends a 2026-07-28 subscriptions/listen of a removed token with an error saying so', async () => {
    await reload({ tokens: alice(T1, T2), permissions: [ALL_RULE] })
    const client = ModernRaw.withTasks(gw.url, ELICIT, bearer(T1))
    const created = await client.result('tools/call', { name: 'demo__slow', arguments: { duration: 15_000, steps: 3 } })
    const taskId = String(created.taskId)
    const stream = await listen(client, T1, { taskIds: [taskId] }, streamSignal())
    expect(await next(stream, (m) => m.method === 'notifications/subscriptions/acknowledged')).toBeDefined()

    await reload({ tokens: alice(T2), permissions: [ALL_RULE] })

    // Without revocation the stream would go on to tell of the task's progress and completion.
    const tail = await rest(stream, (message) => message.method === 'notifications/tasks' && (message.params as Json).status === 'completed')
    expect(tail.ended).toBe(true)
    expect(tail.messages.at(-1)).toMatchObject({ id: 1, error: { code: -32001, message: expect.stringContaining('was revoked') } })
    expect(tail.messages.filter((m) => m.method === 'notifications/tasks' && (m.params as Json).status === 'completed')).toEqual([])
    const other = ModernRaw.withTasks(gw.url, ELICIT, bearer(T2))
    await other.request('tasks/cancel', { taskId })
  })

  it('cancels a 2026-07-28 call held for its retry when its token is removed: the retry is told why', async () => {
    await reload({ tokens: alice(T1, T2), permissions: [ALL_RULE] })
    // Without the tasks extension the call runs synchronously and its question comes back as input_required.
    const first = new ModernRaw(gw.url, ELICIT, bearer(T1))
    const round = await first.result('tools/call', { name: 'demo__ask_user', arguments: { message: 'PIN?' } })
    expect(round.resultType).toBe('input_required')
    const [key] = Object.keys(round.inputRequests as Json)

    await reload({ tokens: alice(T2), permissions: [ALL_RULE] })

    const second = new ModernRaw(gw.url, ELICIT, bearer(T2))
    const retry = await second.request('tools/call', {
      name: 'demo__ask_user',
      arguments: { message: 'PIN?' },
      requestState: round.requestState,
      inputResponses: { [key!]: { action: 'accept', content: { name: '1234' } } },
    })
    expect(retry.body.error).toMatchObject({ code: -32001, message: expect.stringContaining('was revoked') })
  })

  it('answers a call still running for a removed token with the revocation, in either era, and cancels it upstream', async () => {
    await reload({ tokens: alice(T1, T2), permissions: [ALL_RULE] })
    const demo = gw.gateway.upstreams[0]!
    const slow = { name: 'demo__slow', arguments: { duration: 20_000, steps: 5 } }
    const session = await RawSession.open(gw.url, {}, bearer(T1))
    const legacy = session.request('tools/call', slow)
    const modern = new ModernRaw(gw.url, {}, bearer(T1)).request('tools/call', slow)
    await until('both calls running upstream', () => demo.load.active === 2 ? true : undefined)

    await reload({ tokens: alice(T2), permissions: [ALL_RULE] })

    // Without revocation the calls would run to their end and answer with the tool's result.
    const revoked = { error: { code: -32001, message: expect.stringContaining('was revoked') } }
    expect(await legacy).toMatchObject(revoked)
    expect((await modern).body).toMatchObject(revoked)
    await until('the calls cancelled upstream', () => demo.load.active === 0 ? true : undefined)
  })

  it('keeps a stream when its grants widen, and ends it when they narrow', async () => {
    await reload({ tokens: alice(T1), permissions: [ASK_RULE, ECHO_RULE] })
    const session = await RawSession.open(gw.url, ELICIT, bearer(T1))
    const stream = await session.stream('get', streamSignal())

    await reload({ tokens: alice(T1), permissions: [ASK_RULE, ECHO_RULE, ALL_RULE] })
    const kept = await legacyTask(session, 'demo__ask_user', { message: 'still there?' })
    expect((await next(stream, isElicitation)).params).toMatchObject({ message: 'still there?' })
    await session.request('tasks/cancel', { taskId: kept })

    // demo__echo is no longer granted: the stream opened when it was ends.
    await reload({ tokens: alice(T1), permissions: [ASK_RULE] })
    const after = await legacyTask(session, 'demo__ask_user', { message: 'after narrowing' })
    await session.waitFor(after, ['input_required'])
    const tail = await rest(stream, (message) => isElicitation(message) && (message.params as Json).message === 'after narrowing')
    expect(tail.ended).toBe(true)
    await session.request('tasks/cancel', { taskId: after })
  })
})

describe('revocation: what an OAuth access token holds ends when the token expires', () => {
  const jwks = new JwksServer()
  let gw: RunningGateway
  let key: SigningKey
  const aborts = new AbortController()

  beforeAll(async () => {
    ({ gw, key } = await startOAuthGateway(jwks, { clockTolerance: '0s' }))
  })

  afterAll(async () => {
    aborts.abort()
    await gw?.close()
    await jwks.close()
  })

  it('ends the GET stream and answers a subscriptions/listen with the expiry once exp passes', async () => {
    // The session is alice's, opened with a token that lasts; the streams are opened with one that expires soon
    // (long enough to open two streams on a busy machine): the test then waits on their end, not on a clock.
    const opened = await RawSession.open(gw.url, ELICIT, bearer(await jwks.token(key, { sub: 'alice' })))
    const token = await jwks.token(key, { sub: 'alice' }, { expiresIn: '4s' })
    const session = new RawSession(gw.url, bearer(token))
    session.sessionId = opened.sessionId
    const stream = await session.stream('get', aborts.signal)
    const listening = await listen(new ModernRaw(gw.url, {}, bearer(token)), token, { toolsListChanged: true }, aborts.signal)
    expect(await next(listening, (m) => m.method === 'notifications/subscriptions/acknowledged')).toBeDefined()

    expect(await rest(stream, () => false)).toEqual({ ended: true, messages: [] })
    expect(await rest(listening, () => false)).toEqual({
      ended: true,
      messages: [{ jsonrpc: '2.0', id: 1, error: { code: -32001, message: 'Unauthorized: the access token has expired or is not valid yet; get a new one', data: { code: 'GW_ERR_AUTH_EXPIRED' } } }],
    })
    expect((await session.post({ jsonrpc: '2.0', id: 9, method: 'tools/list' })).status).toBe(401)
  }, 60_000)
})
