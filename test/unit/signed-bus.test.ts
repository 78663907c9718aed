import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { BUS, publishOn, subscribeTo, wireName } from '../../src/store/bus-channels.ts'
import { MemoryBus } from '../../src/store/memory/memory-bus.ts'
import { busKey, refusalReporter, SignedBus, type BusRefusal } from '../../src/store/signed-bus.ts'
import type { Logger } from '../../src/observability/logger.ts'
import type { JsonObject } from '../../src/wire/jsonrpc.ts'

const SECRET = 'a secret every process of the cluster shares'
const MAX_AGE_MS = 30_000
const TASK = wireName(BUS.task, 't1')

/** Two processes on one raw bus (as on Redis), and what each refused. */
function cluster (key = busKey(SECRET)) {
  const raw = new MemoryBus()
  const refused: Array<[BusRefusal, string]> = []
  const options = { key, maxAgeMs: MAX_AGE_MS, refused: (reason: BusRefusal, channel: string) => { refused.push([reason, channel]) } }
  const sender = new SignedBus(raw, options)
  const receiver = new SignedBus(raw, options)
  const received: unknown[] = []
  subscribeTo(receiver, BUS.task, 't1', (payload) => received.push(payload))
  return { raw, sender, receiver, refused, received }
}

describe('the signed bus between processes', () => {
  beforeEach(() => { vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') }) })
  afterEach(() => { vi.useRealTimers() })

  it('delivers what another process signed, as it was sent', async () => {
    const { sender, refused, received } = cluster()
    expect(await publishOn(sender, BUS.task, 't1', { type: 'status', status: 'completed' })).toBe(1)
    expect(received).toEqual([{ type: 'status', status: 'completed' }])
    expect(refused).toEqual([])
  })

  it('refuses a message without an envelope as unsigned', async () => {
    const { raw, refused, received } = cluster()
    await raw.publish(TASK, { type: 'status', status: 'completed' })
    expect(received).toEqual([])
    expect(refused).toEqual([['unsigned', TASK]])
  })

  it('refuses a message signed with another key, altered, or signed for another channel, as bad_mac', async () => {
    const { raw, refused, received } = cluster()
    const stranger = new SignedBus(raw, { key: busKey('another secret, of another cluster'), refused: () => {} })
    await stranger.publish(TASK, { type: 'status', status: 'completed' })
    const { sender } = cluster()
    const altered = sender.seal(TASK, { type: 'status', status: 'working' })
    await raw.publish(TASK, { ...altered, payload: altered.payload.replace('working', 'failed') } as unknown as JsonObject)
    const elsewhere = sender.seal(wireName(BUS.task, 't2'), { type: 'status', status: 'cancelled' })
    await raw.publish(TASK, elsewhere as unknown as JsonObject)
    expect(received).toEqual([])
    expect(refused).toEqual([['bad_mac', TASK], ['bad_mac', TASK], ['bad_mac', TASK]])
  })

  it('refuses a message older or newer than the age bound as stale, and accepts one within it', async () => {
    const { raw, sender, refused, received } = cluster()
    const old = sender.seal(TASK, { type: 'status', status: 'completed' }, Date.now() - MAX_AGE_MS - 1)
    const ahead = sender.seal(TASK, { type: 'status', status: 'failed' }, Date.now() + MAX_AGE_MS + 1)
    const skewed = sender.seal(TASK, { type: 'status', status: 'working' }, Date.now() + MAX_AGE_MS - 1000)
    for (const message of [old, ahead, skewed]) await raw.publish(TASK, message as unknown as JsonObject)
    expect(received).toEqual([{ type: 'status', status: 'working' }])
    expect(refused).toEqual([['stale', TASK], ['stale', TASK]])
  })

  it('refuses a message seen before as replayed, and a replay once the nonce is forgotten as stale', async () => {
    const { raw, sender, receiver, refused, received } = cluster()
    const message = sender.seal(TASK, { type: 'status', status: 'completed' }) as unknown as JsonObject
    await raw.publish(TASK, message)
    await raw.publish(TASK, message)
    expect(received).toHaveLength(1)
    expect(refused).toEqual([['replayed', TASK]])
    // Nonces are kept no longer than needed: by the time one is forgotten, its message is stale.
    vi.advanceTimersByTime(2 * MAX_AGE_MS + 1)
    await publishOn(sender, BUS.task, 't1', { type: 'status', status: 'working' })
    expect(receiver.remembered).toBe(1)
    await raw.publish(TASK, message)
    expect(refused).toEqual([['replayed', TASK], ['stale', TASK]])
    expect(received).toHaveLength(2)
  })

  it('refuses a signed payload that fails its channel\'s schema, or a channel not in the table, as malformed', async () => {
    const { raw, sender, refused, received } = cluster()
    await raw.publish(TASK, sender.seal(TASK, { type: 'status', status: 'exploded' }) as unknown as JsonObject)
    await raw.publish(TASK, { ...sender.seal(TASK, { type: 'status', status: 'failed' }), ts: 'now' } as unknown as JsonObject)
    const unknown = new SignedBus(raw, { key: busKey(SECRET), refused: (reason, channel) => { refused.push([reason, channel]) } })
    unknown.subscribe('not-in-the-table', () => received.push('unknown'))
    await sender.publish('not-in-the-table', {})
    expect(received).toEqual([])
    expect(refused).toEqual([['malformed', TASK], ['malformed', TASK], ['malformed', 'not-in-the-table']])
  })

  it('stops hearing a channel on the raw bus once its last handler unsubscribed', async () => {
    const raw = new MemoryBus()
    const bus = new SignedBus(raw, { key: busKey(SECRET), refused: () => {} })
    const first = subscribeTo(bus, BUS.takeover, undefined, () => {})
    const second = subscribeTo(bus, BUS.takeover, undefined, () => {})
    expect(raw.channelCount).toBe(1)
    first()
    expect(raw.channelCount).toBe(1)
    second()
    expect(raw.channelCount).toBe(0)
  })

  it('counts every refusal and logs at most one line per 10 s, with how many were refused since the last', () => {
    const lines: unknown[] = []
    const log = { warn: (fields: unknown) => lines.push(fields) } as unknown as Logger
    const counted: string[] = []
    const report = refusalReporter(log, (reason, channel) => counted.push(`${reason} ${channel}`))
    report('unsigned', 'peer.v1:abc')
    report('replayed', 'peer.v1:abc')
    vi.advanceTimersByTime(9_000)
    report('stale', 'task.v1:t1')
    vi.advanceTimersByTime(1_000)
    report('bad_mac', 'takeover.v1')
    expect(counted).toEqual(['unsigned peer.v1', 'replayed peer.v1', 'stale task.v1', 'bad_mac takeover.v1'])
    expect(lines).toEqual([
      { reason: 'unsigned', channel: 'peer.v1', refused: 1 },
      { reason: 'bad_mac', channel: 'takeover.v1', refused: 3 },
    ])
  })

  it('derives the key from the secret with a label of its own: not the secret, the same in every process', () => {
    expect(busKey(SECRET)).toEqual(busKey(SECRET))
    expect(busKey(SECRET)).toHaveLength(32)
    expect(busKey(SECRET).equals(Buffer.from(SECRET).subarray(0, 32))).toBe(false)
    expect(busKey(SECRET).equals(busKey(`${SECRET}!`))).toBe(false)
  })
})
