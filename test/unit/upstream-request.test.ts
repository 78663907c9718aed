// The one path of a request to an upstream (calls, reads, prompts, completions, subscriptions): which session it
// goes on and that the session is released whatever happens, how long it may take, and what a failure becomes.
// The upstream is faked: its sessions answer as each test says, and count who holds them.
import { ProtocolError, SdkError, SdkErrorCode } from '@modelcontextprotocol/client'
import { describe, expect, it } from 'vitest'
import { GatewayError, RpcError } from '../../src/errors.ts'
import { sessionClient } from '../../src/upstream/client-ref.ts'
import type { SessionRequestOptions } from '../../src/upstream/upstream-session.ts'
import { requestUpstream, type RequestPlan } from '../../src/upstream/upstream-request.ts'
import type { Upstream } from '../../src/upstream/upstream.ts'
import type { JsonObject } from '../../src/wire/jsonrpc.ts'
import { heartConfig } from '../helpers/heart.ts'

/** What the fake upstream's session was sent, and how many leases on it are held. */
interface Fake {
  upstream: Upstream
  held: () => number
  sent: Array<{ method: string, options: SessionRequestOptions }>
  leases: string[]
}

/** An upstream (configured with `settings`) whose session answers each request with `answer`. */
function fakeUpstream (answer: (method: string) => JsonObject | Promise<JsonObject>, settings: JsonObject = {}): Fake {
  const config = heartConfig(settings).upstreams[0]!
  let holds = 0
  const sent: Fake['sent'] = []
  const leases: string[] = []
  const session = {
    request: async (method: string, _params: JsonObject, options: SessionRequestOptions) => {
      sent.push({ method, options })
      return await answer(method)
    },
  }
  const lease = (how: string): { session: unknown, release: () => void } => {
    holds++
    leases.push(how)
    let released = false
    return { session, release: () => { if (!released) { released = true; holds-- } } }
  }
  const upstream = {
    name: config.name,
    config,
    closedBy: undefined as GatewayError | undefined,
    forwardsAuthorization: config.transport === 'streamable-http' && config.forwardAuthorization,
    acquire: async (client: { key: string }, purpose: string) => lease(`${purpose} ${client.key}`),
    rejoin: async (address: { sessionId: string }) => lease(`rejoin ${address.sessionId}`),
  }
  return { upstream: upstream as unknown as Upstream, held: () => holds, sent, leases }
}

const client = sessionClient('alice', 's-1', {})
const OK = { content: [] }

function plan (extra: Partial<RequestPlan> = {}): RequestPlan {
  return { method: 'resources/read', client, purpose: 'read', ...extra }
}

async function failure (promise: Promise<unknown>): Promise<unknown> {
  return await promise.then(() => { throw new Error('it did not fail') }, (err: unknown) => err)
}

describe('the upstream request path', () => {
  it('goes on its client\'s session, or on the session another process opened for the work, and releases it', async () => {
    const fake = fakeUpstream(() => OK)
    expect(await requestUpstream(fake.upstream, plan(), async (request) => await request.send('resources/read', { uri: 'a' }))).toEqual(OK)
    await requestUpstream(fake.upstream, plan({ method: 'tools/call', purpose: 'call', rejoin: { sessionId: 'up-7', protocolVersion: '2025-11-25', era: '2025-11-25' } }),
      async (request) => await request.send('tools/call', {}))
    // A sessionless 2026-07-28 upstream's work goes on the client's own session.
    await requestUpstream(fake.upstream, plan({ method: 'tools/call', purpose: 'call', rejoin: { sessionId: null, protocolVersion: '2026-07-28', era: '2026-07-28' } }),
      async (request) => await request.send('tools/call', {}))
    expect(fake.leases).toEqual([`read ${client.key}`, 'rejoin up-7', `call ${client.key}`])
    expect(fake.held()).toBe(0)
  })

  it('releases the session when the work fails or is cancelled; a kept one only when its holder lets go', async () => {
    const fake = fakeUpstream(() => { throw new ProtocolError(-32002, 'Resource not found', { uri: 'a' }) })
    const err = await failure(requestUpstream(fake.upstream, plan(), async (request) => await request.send('resources/read', { uri: 'a' })))
    // The upstream's own JSON-RPC error reaches the client with its code and data.
    expect(err).toBeInstanceOf(RpcError)
    expect(err).toMatchObject({ rpcCode: -32002, data: { uri: 'a' } })
    expect(fake.held()).toBe(0)
    const controller = new AbortController()
    const cancelled = requestUpstream(fake.upstream, plan({ signal: controller.signal }), async () => {
      controller.abort(new Error('the client went away'))
      throw controller.signal.reason
    })
    expect(await failure(cancelled)).toMatchObject({ code: 'GW_ERR_REQUEST_CANCELLED' })
    expect(fake.held()).toBe(0)
    const release = await requestUpstream(fake.upstream, plan({ method: 'resources/subscribe' }), async (request) => request.keep())
    expect(fake.held()).toBe(1)
    release()
    expect(fake.held()).toBe(0)
  })

  it('takes no session when the request is not admitted, and says why', async () => {
    const fake = fakeUpstream(() => OK)
    const refused = new GatewayError('GW_ERR_UPSTREAM_SLOT_TIMEOUT', ['demo', 'maxConcurrentCalls', '2s'])
    const err = await failure(requestUpstream(fake.upstream, plan({ method: 'tools/call', admit: async () => { throw refused } }), async () => OK))
    expect(err).toBe(refused)
    expect(fake.leases).toEqual([])
  })

  it('bounds a tool by its own timeout over timeouts.call, anything else by timeouts.request, and names what ran out', async () => {
    const fake = fakeUpstream(() => { throw new SdkError(SdkErrorCode.RequestTimeout, 'Request timed out') },
      { toolSettings: { quick: { timeout: '500ms' } }, timeouts: { call: '10s', request: '3s' } })
    const quick = await failure(requestUpstream(fake.upstream, plan({ method: 'tools/call', target: 'quick' }), async (r) => await r.send('tools/call', {})))
    const other = await failure(requestUpstream(fake.upstream, plan({ method: 'tools/call', target: 'other' }), async (r) => await r.send('tools/call', {})))
    const read = await failure(requestUpstream(fake.upstream, plan(), async (r) => await r.send('resources/read', {})))
    expect(fake.sent.map((s) => s.options.timeout)).toEqual([500, 10_000, 3000])
    expect([quick, other, read].map((err) => (err as GatewayError).code)).toEqual(Array(3).fill('GW_ERR_UPSTREAM_TIMEOUT'))
    expect(String(quick)).toContain("tools/call 'quick' within 500ms")
    expect(String(read)).toContain('resources/read within 3000ms')
  })

  it('fails the last requests of an upstream a reload took away with that reason, unless the caller cancelled', async () => {
    const fake = fakeUpstream(() => { throw new SdkError(SdkErrorCode.ConnectionClosed, 'Connection closed') })
    const removed = new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', ['demo', 'a configuration reload removed it'])
    expect(await failure(requestUpstream(fake.upstream, plan(), async (r) => await r.send('resources/read', {})))).toMatchObject({ code: 'GW_ERR_UPSTREAM_CONNECTION_LOST' })
    ;(fake.upstream as { closedBy: GatewayError }).closedBy = removed
    expect(await failure(requestUpstream(fake.upstream, plan(), async (r) => await r.send('resources/read', {})))).toBe(removed)
    const controller = new AbortController()
    controller.abort(new Error('the client cancelled'))
    const cancelled = await failure(requestUpstream(fake.upstream, plan({ signal: controller.signal }), async (r) => await r.send('resources/read', {})))
    expect(cancelled).toMatchObject({ code: 'GW_ERR_REQUEST_CANCELLED' })
  })

  it('sends the caller\'s Authorization header only to an upstream configured to receive it, and names the target on the trace', async () => {
    const targets: Array<[string, string | undefined]> = []
    const trace = { target: (upstream: string, tool: string | undefined) => { targets.push([upstream, tool]) } } as unknown as RequestPlan['trace']
    for (const forwardAuthorization of [false, true]) {
      const fake = fakeUpstream(() => OK, { forwardAuthorization })
      await requestUpstream(fake.upstream, plan({ authorization: 'Bearer t', trace, traceName: 'demo__echo' }), async (r) => await r.send('resources/read', {}))
      expect(fake.sent[0]!.options).toMatchObject({ authorization: forwardAuthorization ? 'Bearer t' : undefined, trace })
    }
    expect(targets).toEqual([['demo', 'demo__echo'], ['demo', 'demo__echo']])
  })
})
