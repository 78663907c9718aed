import { afterEach, describe, expect, it } from 'vitest'
import { pino } from 'pino'
import { PeerRequests } from '../../src/cluster/peer-requests.ts'
import type { JsonObject } from '../../src/wire/jsonrpc.ts'
import { capabilityRequired } from '../../src/protocol/2026-07-28/envelope.ts'
import { RequestStateCodec } from '../../src/protocol/2026-07-28/request-state.ts'
import { RetryRouter, type HeldRetry, type RouteRetry } from '../../src/protocol/2026-07-28/retry-router.ts'
import { MemoryBus } from '../../src/store/memory/memory-bus.ts'
import { MemoryLeaseStore } from '../../src/store/memory/memory-store.ts'

const SECRET = 'a-shared-secret-of-some-length'

/** A gateway process as far as retries go: its router, and the retries it served itself. */
interface Process {
  router: RetryRouter
  retry: RouteRetry
  served: HeldRetry[]
  peers: PeerRequests
}

/** Two processes on one bus; each resumes with `resume` and records what it served. */
function cluster (resume: (retry: HeldRetry) => Promise<JsonObject>): { a: Process, b: Process, bus: MemoryBus, published: () => number } {
  const bus = new MemoryBus()
  let publishes = 0
  const publish = bus.publish.bind(bus)
  bus.publish = async (channel, message) => {
    publishes++
    return await publish(channel, message)
  }
  const leases = new MemoryLeaseStore()
  const start = (processId: string): Process => {
    const peers = new PeerRequests(processId, bus, leases)
    void leases.renew(processId, Date.now() + 60_000)
    const router = new RetryRouter({ processId, states: new RequestStateCodec(SECRET, 60_000), peers, log: pino({ level: 'silent' }) })
    const served: HeldRetry[] = []
    const retry = router.route('tools/call', async (held) => {
      served.push(held)
      return await resume(held)
    })
    return { router, retry, served, peers }
  }
  return { a: start('a'), b: start('b'), bus, published: () => publishes }
}

describe('RetryRouter', () => {
  let closers: Array<() => void> = []
  afterEach(() => {
    for (const close of closers) close()
    closers = []
  })
  const started = (c: ReturnType<typeof cluster>): ReturnType<typeof cluster> => {
    closers.push(() => c.a.peers.close(), () => c.b.peers.close())
    return c
  }

  it('resumes a call held here without touching the bus', async () => {
    const c = started(cluster(async () => ({ content: [] })))
    const state = c.a.router.mint('call-1', 'alice')
    expect(await c.a.retry(state, 'alice', { k: { action: 'accept' } }, new AbortController().signal)).toEqual({ content: [] })
    expect(c.a.served).toEqual([{ callId: 'call-1', principal: 'alice', inputResponses: { k: { action: 'accept' } } }])
    expect(c.published()).toBe(0)
  })

  it('has the process named in the requestState serve a retry another process received', async () => {
    const c = started(cluster(async (held) => ({ resultType: 'input_required', callId: held.callId })))
    const state = c.a.router.mint('call-2', 'alice')
    expect(await c.b.retry(state, 'alice', {}, new AbortController().signal)).toEqual({ resultType: 'input_required', callId: 'call-2' })
    expect(c.a.served).toHaveLength(1)
    expect(c.b.served).toHaveLength(0)
  })

  it('passes the owner\'s error on unchanged: code, HTTP status, JSON-RPC code, message and data', async () => {
    const original = capabilityRequired('sampling')
    const c = started(cluster(async () => { throw original }))
    const failure = await c.b.retry(c.a.router.mint('call-3', 'alice'), 'alice', {}, new AbortController().signal).catch((err: unknown) => err)
    expect(failure).toMatchObject({ name: 'GatewayError', code: original.code, statusCode: 400, rpcCode: -32021, message: original.message, data: original.data })
  })

  it('verifies the requestState before anything is forwarded', async () => {
    const c = started(cluster(async () => ({})))
    const state = c.a.router.mint('call-4', 'alice')
    await expect(c.b.retry(state, 'bob', {}, new AbortController().signal)).rejects.toMatchObject({ code: 'GW_ERR_REQUEST_STATE_INVALID' })
    expect(c.published()).toBe(0)
  })

  it('answers GW_ERR_PEER_LOST when the process holding the call is gone', async () => {
    const c = started(cluster(async () => ({})))
    const state = c.a.router.mint('call-5', 'alice')
    c.a.peers.close()
    await expect(c.b.retry(state, 'alice', {}, new AbortController().signal)).rejects.toMatchObject({ code: 'GW_ERR_PEER_LOST', rpcCode: -32603 })
  })
})
