// Home routing between gateway processes that share a store (one memory store, one bus): a request that needs
// the client's upstream sessions runs on the client's home, whichever process it reached, and what it writes and
// asks of the client travels back; a home that died is replaced, and the request runs on the new one.
import { afterEach, describe, expect, it } from 'vitest'
import type { Access } from '../../src/auth/access.ts'
import { ClientHomes } from '../../src/cluster/client-homes.ts'
import { HomeRouting } from '../../src/cluster/home-routing.ts'
import { PeerRequests } from '../../src/cluster/peer-requests.ts'
import type { Handler, RequestContext } from '../../src/dispatch/context.ts'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import { sessionClient } from '../../src/upstream/client-ref.ts'
import type { JsonObject, RpcMessage } from '../../src/wire/jsonrpc.ts'
import { silent } from '../helpers/heart.ts'

const LEASE_MS = 60_000

/** One gateway process: its home routing over the shared store, and the method table it routes. */
interface Process {
  id: string
  table: ReadonlyMap<string, Handler>
  homes: ClientHomes
  peers: PeerRequests
}

const running: Process[] = []

async function gatewayProcess (store: MemoryStore, id: string, shared = true): Promise<Process> {
  await store.leases.renew(id, Date.now() + LEASE_MS)
  const homes = new ClientHomes({ processId: id, homes: store.homes, shared, ttlMs: LEASE_MS, holdsSessions: () => false, log: silent })
  const peers = new PeerRequests(id, store.bus, store.leases)
  const routing = new HomeRouting({ homes, peers, access: (key) => ({ key }) as unknown as Access, log: silent })
  const serve: Handler = async (params, ctx) => {
    ctx.notify('notifications/progress', { progressToken: 'p', progress: 1 })
    const answer = params.ask === true && ctx.request !== undefined ? await ctx.request('elicitation/create', { message: 'Sure?' }, ctx.signal) : undefined
    return { servedBy: id, principal: ctx.caller.principal ?? null, client: ctx.client.key, ...(answer !== undefined && { answer }) }
  }
  const table = routing.route('legacy', new Map<string, Handler>([
    ['tools/call', serve],
    ['tasks/get', async () => ({ servedBy: id })],
  ]), ['tools/call'])
  const process = { id, table, homes, peers }
  running.push(process)
  return process
}

/** Stops a process as a crash would: it receives nothing more, and its home entries stay in the store until they lapse. */
function crash (process: Process): void {
  process.peers.close()
}

/** A request of alice's session `s1` reaching `process`; `sent` collects what travels back to her stream. */
type Served = { result: JsonObject, sent: RpcMessage[], asked: string[] }

async function request (process: Process, method: string, params: JsonObject = {}): Promise<Served> {
  const sent: RpcMessage[] = []
  const asked: string[] = []
  const ctx: RequestContext = {
    client: sessionClient('s1', 'alice', {}),
    clientCapabilities: { elicitation: {} },
    sessionId: 's1',
    caller: { principal: 'alice', access: { key: 'all' } as unknown as Access, authorization: undefined },
    requestId: 1,
    signal: new AbortController().signal,
    progressToken: 'p',
    log: silent,
    disconnected: new AbortController().signal,
    openStream: () => {},
    send: (message) => { sent.push(message) },
    notify: (method, notification) => { sent.push({ jsonrpc: '2.0', method, params: notification }) },
    request: async (method) => {
      asked.push(method)
      return { action: 'accept' }
    },
  }
  const handler = process.table.get(method)
  if (handler === undefined) throw new Error(`no ${method}`)
  return { result: await handler(params, ctx), sent, asked }
}

describe('home routing', () => {
  afterEach(async () => {
    for (const process of running.splice(0)) {
      process.peers.close()
      await process.homes.close()
    }
  })

  it('runs a client\'s requests on the process its first request reached, and sends back what the home writes and asks', async () => {
    const store = new MemoryStore()
    const a = await gatewayProcess(store, 'a')
    const b = await gatewayProcess(store, 'b')
    expect((await request(a, 'tools/call')).result).toMatchObject({ servedBy: 'a' })

    const forwarded = await request(b, 'tools/call', { ask: true })
    expect(forwarded.result).toEqual({ servedBy: 'a', principal: 'alice', client: 'session:s1', answer: { action: 'accept' } })
    // The home's progress notification and its question reached the client through the process holding its request.
    expect(forwarded.sent).toEqual([{ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'p', progress: 1 } }])
    expect(forwarded.asked).toEqual(['elicitation/create'])
  })

  it('serves a method that needs no upstream session where it arrived', async () => {
    const store = new MemoryStore()
    const a = await gatewayProcess(store, 'a')
    const b = await gatewayProcess(store, 'b')
    await request(a, 'tools/call')
    expect((await request(b, 'tasks/get')).result).toEqual({ servedBy: 'b' })
  })

  it('replaces a home that died: the request runs on the process it reached, which is the home from then on', async () => {
    const store = new MemoryStore()
    const a = await gatewayProcess(store, 'a')
    const b = await gatewayProcess(store, 'b')
    const c = await gatewayProcess(store, 'c')
    await request(a, 'tools/call')
    crash(a)

    expect((await request(b, 'tools/call')).result).toMatchObject({ servedBy: 'b' })
    expect(await store.homes.claim('session:s1', null, 'someone', LEASE_MS)).toBe('b')
    // Another process learns the new home rather than claiming it as well.
    expect((await request(c, 'tools/call')).result).toMatchObject({ servedBy: 'b' })
  })

  it('gives its homes up as it stops: the client\'s next request makes the process it reached its home', async () => {
    const store = new MemoryStore()
    const a = await gatewayProcess(store, 'a')
    const b = await gatewayProcess(store, 'b')
    await request(a, 'tools/call')
    // a still receives requests: only the home it gave up sends the client elsewhere.
    await a.homes.close()
    expect((await request(b, 'tools/call')).result).toMatchObject({ servedBy: 'b' })
  })

  it('keeps every client at home on the process it reached when the store is not shared', async () => {
    const store = new MemoryStore()
    const a = await gatewayProcess(store, 'a', false)
    const b = await gatewayProcess(store, 'b', false)
    expect((await request(a, 'tools/call')).result).toMatchObject({ servedBy: 'a' })
    expect((await request(b, 'tools/call')).result).toMatchObject({ servedBy: 'b' })
  })
})
