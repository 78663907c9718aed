import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { logFingerprint } from '../../src/observability/logger.ts'
import { textOf } from '../helpers/clients.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { legacyTask, RawSession } from '../helpers/raw-session.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

/** Capabilities that differ from client to client (each needs a session of its own to list what it sees). */
const capabilities = (i: number): Json => ({ elicitation: { form: {}, [`variant${i}`]: {} } })

const toolNames = (result: unknown): string[] => ((result as Json).tools as Json[]).map((tool) => String(tool.name))

// The four gateways below are independent: their suites run concurrently (the tests within one, in order).
describe.concurrent('upstream sessions per call are bounded by maxSessions', () => {
  let gw: RunningGateway

  beforeAll(async () => {
    gw = await startGateway({ upstreams: [demoStdio({ sessions: 'per-call', maxSessions: 4 })] })
  })

  afterAll(async () => {
    await gw?.close()
  })

  const sessions = (): number => gw.gateway.upstreams[0]!.load.sessions

  // Each new capability set spawns an upstream process: 7 lists against a limit of 4 make room 3 times.
  it.sequential('keeps at most maxSessions processes for 7 unauthenticated lists with as many capability sets, one after another', async () => {
    for (let i = 0; i < 7; i++) {
      const client = new ModernRaw(gw.url, capabilities(i))
      expect(toolNames(await client.result('tools/list'))).toContain('demo__echo')
      expect(sessions()).toBeLessThanOrEqual(4)
    }
    expect(gw.logs().filter((line) => line.msg === 'closed an idle upstream session to make room for another').length).toBeGreaterThanOrEqual(3)
  })

  it.sequential('answers 12 concurrent lists of 12 clients with their lists or the limit, never a shorter list', async () => {
    const clients = await Promise.all(Array.from({ length: 12 }, async (_, i) => await RawSession.open(gw.url, capabilities(100 + i))))
    const answers = await Promise.all(clients.map(async (client) => await client.request('tools/list')))
    expect(sessions()).toBeLessThanOrEqual(4)
    let listed = 0
    for (const answer of answers) {
      if (answer.error === undefined) {
        expect(toolNames(answer.result)).toContain('demo__echo')
        listed++
      } else {
        expect(answer.error).toMatchObject({ code: -32059, data: { code: 'GW_ERR_UPSTREAM_SESSION_LIMIT', upstream: 'demo', limit: 'maxSessions' } })
      }
    }
    expect(listed).toBeGreaterThanOrEqual(4)
    await Promise.all(clients.map(async (client) => await client.close()))
  })
})

const TOKENS = { alice: 'alice-token-0123456789', bob: 'bob-token-0123456789' }
const bearer = (who: keyof typeof TOKENS): Record<string, string> => ({ authorization: `Bearer ${TOKENS[who]}` })

describe.concurrent('upstream sessions are shared fairly between principals', () => {
  let gw: RunningGateway

  beforeAll(async () => {
    gw = await startGateway({
      auth: { tokens: Object.entries(TOKENS).map(([principal, token]) => ({ principal, sha256: sha256Hex(token) })) },
      limits: { sessionsPerPrincipal: 10 },
      // maxSessions 4: a principal's share is 1 by default.
      upstreams: [demoStdio({ maxSessions: 4 })],
      tasks: { pollInterval: '50ms' },
    })
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('lets alice hold no more than her share, and bob gets his session and calls demo__echo', async () => {
    const alice = await Promise.all([0, 1, 2, 3].map(async () => await RawSession.open(gw.url, undefined, bearer('alice'))))
    // Her first client runs a task that waits for an answer, holding its upstream session.
    const waiting = await legacyTask(alice[0]!, 'demo__ask_user', {})
    await alice[0]!.waitFor(waiting, ['input_required'])
    // Her other clients get the refusal, which names the share: her only session is in use.
    for (const session of alice.slice(1)) {
      const refused = await session.request('tools/call', { name: 'demo__echo', arguments: { text: 'alice again' } })
      expect(refused.error).toMatchObject({ code: -32059, data: { code: 'GW_ERR_UPSTREAM_SESSION_SHARE', upstream: 'demo', limit: 'maxSessionsPerPrincipal', max: 1 } })
    }

    // bob declares capabilities nobody else has: listing what he sees takes a session of his own.
    const bob = await RawSession.open(gw.url, { elicitation: { form: {} }, sampling: {} }, bearer('bob'))
    expect(toolNames((await bob.request('tools/list')).result)).toContain('demo__echo')
    expect(textOf((await bob.request('tools/call', { name: 'demo__echo', arguments: { text: 'bob here' } })).result as Json)).toBe('bob here')

    await alice[0]!.request('tasks/cancel', { taskId: waiting })
    for (const session of [...alice, bob]) await session.close()
  })
})

describe.concurrent('a client refused an upstream session', () => {
  let gw: RunningGateway

  beforeAll(async () => {
    gw = await startGateway({
      auth: { tokens: Object.entries(TOKENS).map(([principal, token]) => ({ principal, sha256: sha256Hex(token) })) },
      upstreams: [demoStdio({ maxSessions: 1 })],
      tasks: { pollInterval: '50ms' },
    })
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('gets GW_ERR_UPSTREAM_SESSION_LIMIT for lists and calls, never a shorter list or Unknown tool', async () => {
    const alice = await RawSession.open(gw.url, undefined, bearer('alice'))
    const waiting = await legacyTask(alice, 'demo__ask_user', {})
    await alice.waitFor(waiting, ['input_required'])
    const limit = { code: -32059, message: expect.stringContaining("upstream 'demo' already has 1 sessions open"), data: { code: 'GW_ERR_UPSTREAM_SESSION_LIMIT', limit: 'maxSessions' } }
    const bob = await RawSession.open(gw.url, { elicitation: { form: {} }, sampling: {} }, bearer('bob'))
    expect((await bob.request('tools/list')).error).toMatchObject(limit)
    expect((await bob.request('tools/call', { name: 'demo__echo', arguments: { text: 'bob' } })).error).toMatchObject(limit)
    const modern = new ModernRaw(gw.url, { sampling: {} }, bearer('bob'))
    expect((await modern.request('tools/call', { name: 'demo__echo', arguments: { text: 'bob' } })).body.error).toMatchObject(limit)
    // Once alice's task ends, her session is idle and makes room.
    await alice.request('tasks/cancel', { taskId: waiting })
    const echoed = await until('bob getting a session', async () => {
      const answer = await bob.request('tools/call', { name: 'demo__echo', arguments: { text: 'bob' } })
      return answer.error === undefined ? answer.result : undefined
    })
    expect(textOf(echoed)).toBe('bob')
    await alice.close()
    await bob.close()
  })
})

describe.concurrent('a client that left without a DELETE', () => {
  let gw: RunningGateway
  const carol = 'carol-token-0123456789'

  beforeAll(async () => {
    const tokens = [...Object.entries(TOKENS), ['carol', carol]].map(([principal, token]) => ({ principal, sha256: sha256Hex(token!) }))
    // Every session unused for 1 ms counts as abandoned: the test needs no clock to make one.
    gw = await startGateway({ auth: { tokens }, upstreams: [demoStdio({ maxSessions: 3, maxSessionsPerPrincipal: 2, abandonedTimeout: '1ms' })] })
  })

  afterAll(async () => {
    await gw?.close()
  })

  it('has its upstream session closed first when room is needed, before the largest holder\'s', async () => {
    const echo = async (session: RawSession): Promise<string> => textOf((await session.request('tools/call', { name: 'demo__echo', arguments: { text: 'hi' } })).result as Json)
    const gone = await RawSession.open(gw.url, undefined, bearer('bob'))
    expect(await echo(gone)).toBe('hi')
    // bob's client goes away without a DELETE; alice, the largest holder, keeps using her two sessions.
    const alice = [await RawSession.open(gw.url, undefined, bearer('alice')), await RawSession.open(gw.url, undefined, bearer('alice'))]
    for (const session of alice) expect(await echo(session)).toBe('hi')
    const newcomer = await RawSession.open(gw.url, undefined, { authorization: `Bearer ${carol}` })
    expect(await echo(newcomer)).toBe('hi')
    const closed = gw.logs().filter((line) => line.msg === 'closed an idle upstream session to make room for another').map((line) => line.session)
    expect(closed).toEqual([`session:${logFingerprint(gone.sessionId)}`])
    expect(gw.gateway.upstreams[0]!.load.sessions).toBe(3)
    for (const session of [...alice, newcomer]) await session.close()
  })
})
