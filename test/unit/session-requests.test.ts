import { pino } from 'pino'
import { describe, expect, it } from 'vitest'
import { SessionRequests } from '../../src/protocol/2025-11-25/session-requests.ts'
import { BUS, publishOn, subscribeTo } from '../../src/store/bus-channels.ts'
import { MemoryBus } from '../../src/store/memory/memory-bus.ts'
import { StreamHub } from '../../src/streams/stream-hub.ts'
import type { JsonObject } from '../../src/wire/jsonrpc.ts'

function setup (): { bus: MemoryBus, requests: SessionRequests, offered: JsonObject[] } {
  const bus = new MemoryBus()
  const hub = new StreamHub(bus, { streamsPerSession: 4, keepAliveMs: 60_000, stallTimeoutMs: 60_000, bufferBytes: 1 << 20, log: pino({ level: 'silent' }) })
  const offered: JsonObject[] = []
  // The inbox of the process `p2`, where a GET stream of the session opens.
  subscribeTo(bus, BUS.offer, 'p2', ({ message }) => { offered.push(message) })
  return { bus, requests: new SessionRequests(hub, bus, pino({ level: 'silent' })), offered }
}

describe('requests for a session\'s GET stream', () => {
  it('keeps a request sent while the session holds no GET stream, and sends it once to the next one that opens', async () => {
    const { bus, requests, offered } = setup()
    const request = { jsonrpc: '2.0' as const, id: 'gw-1', method: 'roots/list', params: {} }
    await requests.send('s1', request)
    expect(requests.size).toBe(1)
    await publishOn(bus, BUS.getStream, undefined, { sessionId: 's2', from: 'p2' })
    expect(offered).toEqual([])
    await publishOn(bus, BUS.getStream, undefined, { sessionId: 's1', from: 'p2' })
    expect(offered).toEqual([request])
    expect(requests.size).toBe(0)
    await publishOn(bus, BUS.getStream, undefined, { sessionId: 's1', from: 'p2' })
    expect(offered).toEqual([request])
  })

  it('drops a kept request its upstream cancelled before any GET stream carried it, and keeps no notification', async () => {
    const { bus, requests, offered } = setup()
    await requests.send('s1', { jsonrpc: '2.0', id: 'gw-2', method: 'roots/list', params: {} })
    await requests.send('s1', { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'gw-2', reason: 'timeout' } })
    await requests.send('s1', { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x' } })
    expect(requests.size).toBe(0)
    await publishOn(bus, BUS.getStream, undefined, { sessionId: 's1', from: 'p2' })
    expect(offered).toEqual([])
  })
})
