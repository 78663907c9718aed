import { connect, type Socket } from 'node:net'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { textOf } from '../helpers/clients.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { legacyTask, RawSession } from '../helpers/raw-session.ts'
import { runTask } from '../helpers/tasks.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const ALICE = { authorization: 'Bearer alice-noisy-token-0123456789' }
const BOB = { authorization: 'Bearer bob-quiet-token-0123456789' }
/** The address alice's silent sockets come from (the whole of 127.0.0.0/8 is this machine). */
const SILENT_FROM = '127.0.0.3'
const SILENT_SOCKETS = 300
/** What bob runs in one round: plain calls one after another, and tasks, which must all complete. */
const CALLS_PER_ROUND = 100
const TASKS_PER_ROUND = 3
const ROUNDS = 5
/** The series of the demo upstream's call slots in /metrics. */
const ACTIVE = 'gateway_upstream_calls_active{upstream="demo"}'
const QUEUED = 'gateway_upstream_calls_queued{upstream="demo"}'
const CONNECTIONS_REFUSED = 'closed new connections from an address that holds limits.connectionsPerIp connections'

/** A JSON-RPC error's code and message, or undefined for a result. */
function refusal (response: Json): { code: number, message: string, data?: Json } | undefined {
  return response.error as { code: number, message: string, data?: Json } | undefined
}

/** The gateway's call slots of the demo upstream, from one scrape of /metrics. */
async function slots (gw: RunningGateway): Promise<{ active: number, queued: number }> {
  const res = await gw.app.inject({ method: 'GET', url: '/metrics' })
  const sample = (series: string): number => Number(res.body.split('\n').find((line) => line.startsWith(`${series} `))?.slice(series.length + 1) ?? 0)
  return { active: sample(ACTIVE), queued: sample(QUEUED) }
}

/**
 * Waits until alice's four long calls are all that hold or wait for the upstream's call slots: two run (her share
 * of maxConcurrentCallsPerPrincipal), two wait. A slot is given back a moment after its call's answer is sent.
 */
async function aliceHoldsHerShare (gw: RunningGateway): Promise<void> {
  let last = { active: -1, queued: -1 }
  await until('alice\'s long calls to hold her share of the call slots, and only they', async () => {
    last = await slots(gw)
    return last.active === 2 && last.queued === 2 ? true : undefined
  }, { describeLast: () => `: last seen ${JSON.stringify(last)}` })
}

/** A v1 SDK client (what most deployed 2025-era hosts are built on) with a bearer token. */
async function connectAs (url: string, headers: Record<string, string>): Promise<Client> {
  const client = new Client({ name: 'bob', version: '1.0.0' }, { capabilities: {} })
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }))
  return client
}

/**
 * Opens `count` connections from `localAddress` that never send a byte, and resolves once the gateway has closed
 * every one of them (those over `limits.connectionsPerIp` at once, the others after `limits.headersTimeout`).
 */
async function silentSockets (gw: RunningGateway, count: number, localAddress: string): Promise<void> {
  const { hostname, port } = new URL(gw.base)
  await Promise.all(Array.from({ length: count }, async () => {
    const socket: Socket = connect({ host: hostname, port: Number(port), localAddress })
    socket.on('error', () => {})
    // Reads and drops what the gateway may answer before closing (a 408): a socket nobody reads never sees its end.
    socket.resume()
    // Not events.once: it rejects on the socket's 'error' (a reset), which is one way the gateway ends it.
    await new Promise((resolve) => socket.once('close', resolve))
  }))
}

/** Bob's round: plain calls one after another and a few tasks alongside; every one must succeed. */
async function bobRound (bob: Client): Promise<void> {
  const tasks = Array.from({ length: TASKS_PER_ROUND }, async (_, i) => await runTask(bob, 'demo__echo', { text: `task ${i}` }))
  for (let i = 0; i < CALLS_PER_ROUND; i++) {
    const result = await bob.callTool({ name: 'demo__echo', arguments: { text: `call ${i}` } })
    expect(textOf(result), `bob's call ${i}`).toBe(`call ${i}`)
  }
  for (const [i, outcome] of (await Promise.all(tasks)).entries()) {
    expect(outcome.error, `bob's task ${i}`).toBeUndefined()
    expect(textOf(outcome.result), `bob's task ${i}`).toBe(`task ${i}`)
  }
}

describe('a noisy neighbour takes nothing the others need', () => {
  let gw: RunningGateway
  let bob: Client
  const alice: RawSession[] = []

  beforeAll(async () => {
    const token = (headers: { authorization: string }, principal: string): Json => ({ principal, sha256: sha256Hex(headers.authorization.slice('Bearer '.length)) })
    gw = await startGateway({
      auth: { tokens: [token(ALICE, 'alice'), token(BOB, 'bob')] },
      metrics: { listener: 'main' },
      limits: { storedBytesPerPrincipal: '1mb', connectionsPerIp: 50, headersTimeout: '1s' },
      upstreams: [demoStdio({
        maxSessions: 8,
        maxSessionsPerPrincipal: 2,
        maxConcurrentCalls: 4,
        maxConcurrentCallsPerPrincipal: 2,
        maxResponseBytes: '256kb',
        // Bob's own tasks share his two slots with his calls: on a loaded machine one may wait more than a second for them.
        slotWaitTimeout: '20s',
      })],
    })
    bob = await connectAs(gw.url, BOB)
  })

  afterAll(async () => {
    await bob?.close()
    await gw?.close()
  })

  // What bob would notice is a refusal, a call that waits for a slot alice holds (his calls have a slotWaitTimeout),
  // or a task that never ends; so the test counts shares and outcomes. It compares no latencies: alice's requests
  // share the test process's CPU with bob's, so on a loaded machine a latency ratio measures the machine.
  it('keeps the second principal\'s calls and tasks served from his share while the first takes all of hers', async () => {
    // Bob alone: his round opens his upstream session.
    await bobRound(bob)

    // Alice takes what she can of everything at once.
    const stop = new AbortController()
    for (let i = 0; i < 2; i++) alice.push(await RawSession.open(gw.url, { elicitation: { form: {} } }, ALICE))
    // Questions she never answers: they hold her two upstream sessions, and no call slot.
    const parked = await Promise.all(alice.flatMap((session) => Array.from({ length: 3 }, async () =>
      await legacyTask(session, 'demo__ask_user', { timeoutMs: 600_000 }, 600_000))))
    await Promise.all(parked.map(async (taskId, i) => await alice[Math.floor(i / 3)]!.waitFor(taskId, ['input_required'])))
    // A third client of hers is refused an upstream session, and told why.
    const third = await RawSession.open(gw.url, {}, ALICE)
    const echo = { name: 'demo__echo', arguments: { text: 'a third session' } }
    expect(refusal(await third.request('tools/call', echo))?.data?.code).toBe('GW_ERR_UPSTREAM_SESSION_SHARE')
    // An answer over the upstream's size cap is refused, not read whole.
    const large = { name: 'demo__echo', arguments: { text: 'y'.repeat(300_000) } }
    expect(refusal(await alice[1]!.request('tools/call', large))?.message).toContain('maxResponseBytes')
    // Large arguments until her budget of stored bytes is spent.
    const big = { name: 'demo__echo', arguments: { text: 'x'.repeat(200_000) }, task: { ttl: 600_000 } }
    const spent = await until('alice\'s budget of stored bytes spent', async () => refusal(await alice[0]!.request('tools/call', big)))
    expect(spent.message).toContain('storedBytesPerPrincipal')
    expect(spent.code).toBe(-32070)
    // Long calls: at most her share of the call slots run (2 of the upstream's 4), the rest wait.
    await Promise.all(alice.flatMap((session) => [0, 1].map(async () => await legacyTask(session, 'demo__slow', { duration: 600_000, steps: 1 }, 600_000))))
    await aliceHoldsHerShare(gw)

    // And keeps at it while bob works: new sessions, large tasks and large answers, each refused.
    let refused = 0
    const attack = (async () => {
      while (!stop.signal.aborted) {
        const answers = await Promise.all([
          third.request('tools/call', echo),
          alice[0]!.request('tools/call', big),
          alice[1]!.request('tools/call', large),
        ])
        refused += answers.filter((answer) => answer.error !== undefined).length
      }
    })()
    // Every round of bob's runs beside a fresh batch of silent sockets from one address.
    for (let round = 0; round < ROUNDS; round++) {
      await Promise.all([bobRound(bob), silentSockets(gw, SILENT_SOCKETS, SILENT_FROM)])
    }
    stop.abort()
    await attack

    expect(refused, 'alice\'s attempts were refused').toBeGreaterThan(0)
    // Her long calls still hold her two slots and no more: bob's calls took the others and gave them back.
    await aliceHoldsHerShare(gw)
    // Her silent sockets beyond limits.connectionsPerIp were closed at once, never more than 50 held.
    const refusedConnections = gw.logs().filter((line) => line.msg === CONNECTIONS_REFUSED && String(line.address).endsWith(SILENT_FROM))
    expect(refusedConnections.length).toBeGreaterThan(0)
    expect(refusedConnections.filter((line) => line.open !== 50)).toEqual([])
  })
})
