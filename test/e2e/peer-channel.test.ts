import { randomBytes, randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MemoryBus } from '../../src/store/memory/memory-bus.ts'
import { busKey, SignedBus } from '../../src/store/signed-bus.ts'
import { demoStdioYaml, startGatewayProcess, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { purge, REDIS_URL } from '../helpers/redis.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

/** A message seen on the bus: its channel (without the key prefix), its text, and the payload inside. */
interface Seen {
  channel: string
  text: string
  payload: Json
}

/** The payload a message carries: inside a signed envelope, or the message itself ({} for what is not a JSON object). */
function payloadOf (text: string): Json {
  let message: unknown
  try {
    message = JSON.parse(text)
  } catch {}
  if (typeof message !== 'object' || message === null) return {}
  const { mac, payload } = message as Json
  return typeof mac === 'string' && typeof payload === 'string' ? JSON.parse(payload) as Json : message as Json
}

/** The sum of the series of `metric` whose labels include `label`, as gateway `url` reports them. */
async function metric (url: string, name: string, label: string): Promise<number> {
  const text = await (await fetch(new URL('/metrics', url))).text()
  let sum = 0
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) && line.includes(label)) sum += Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return sum
}

/** The refusals gateway `url` counted, for `reason`, over every channel. */
async function refusals (url: string, reason: string): Promise<number> {
  return await metric(url, 'gateway_bus_refusals_total', `reason="${reason}"`)
}

/** The upstream calls of the demo's echo tool gateway `url` made. */
async function echoCalls (url: string): Promise<number> {
  return await metric(url, 'gateway_upstream_call_duration_seconds_count', 'tool="echo"')
}

/**
 * Two gateway processes on one Redis, and someone else who can PUBLISH on it (anyone Redis lets in): the
 * processes execute only what the other process signed, once, while it is fresh.
 */
describe('the channel between gateway processes', () => {
  const prefix = `mcpgw-peer:${randomUUID()}:`
  const secret = randomBytes(32).toString('hex')
  let a: GatewayProcess
  let b: GatewayProcess
  let spy: Redis
  let intruder: Redis
  const seen: Seen[] = []
  /** The real request B forwarded to A (the client's home), and the channel it took. */
  let captured: Seen

  beforeAll(async () => {
    const file = writeConfig(`
store: { kind: redis, url: ${JSON.stringify(REDIS_URL)}, prefix: ${JSON.stringify(prefix)} }
server: { stateSecret: ${JSON.stringify(secret)} }
metrics: { listener: main }
upstreams:
${demoStdioYaml()}
`)
    spy = new Redis(REDIS_URL)
    intruder = new Redis(REDIS_URL)
    spy.on('pmessage', (_pattern: string, channel: string, text: string) => {
      seen.push({ channel: channel.slice(prefix.length), text, payload: payloadOf(text) })
    })
    await spy.psubscribe(`${prefix}bus:*`)
    ;[a, b] = await Promise.all([startGatewayProcess(file), startGatewayProcess(file)])
    // The session's first request that needs an upstream session makes A its home; B forwards the next one there.
    const session = await RawSession.open(a.url)
    await session.request('tools/list')
    const echoed = await session.on(b.url).request('tools/call', { name: 'demo__echo', arguments: { text: 'genuine' } })
    expect(JSON.stringify(echoed.result)).toContain('genuine')
    captured = seen.find((m) => m.payload.type === 'request' && m.payload.kind === 'home/request')!
    expect(captured).toBeDefined()
  })

  afterAll(async () => {
    for (const gateway of [a, b]) gateway?.child.kill('SIGTERM')
    await Promise.all([a?.exited, b?.exited])
    await Promise.all([spy?.quit(), intruder?.quit()])
    await purge(prefix)
  })

  /** A forged home/request on A's inbox that asks for an echo of `text`, its replies going to `from`. */
  function forged (text: string, from: string): Json {
    const original = captured.payload
    const payload = original.payload as Json
    return {
      ...original,
      id: randomBytes(12).toString('base64url'),
      from,
      payload: { ...payload, forwardId: randomBytes(12).toString('base64url'), method: 'tools/call', params: { name: 'demo__echo', arguments: { text } } },
    }
  }

  /** Waits until A counted one more refusal of `reason` than `before`, or some reply to `from` appeared; returns the replies. */
  async function outcome (reason: string, before: number, replies: () => Seen[]): Promise<Seen[]> {
    await until(`a refusal (${reason}) or a reply`, async () => (replies().length > 0 || await refusals(a.url, reason) > before) || undefined)
    return replies()
  }

  it('refuses a hand-made request published on Redis: nothing runs, and the refusal is counted', async () => {
    const before = await refusals(a.url, 'unsigned')
    // The genuine call ran on A, the client's home.
    const calls = await echoCalls(a.url)
    expect(calls).toBe(1)
    const attacker = `attacker-${randomUUID()}`
    const message = forged('forged', attacker)
    await intruder.publish(`${prefix}${captured.channel}`, JSON.stringify(message))
    const replies = await outcome('unsigned', before, () => seen.filter((m) => m.payload.id === message.id && m.payload.type === 'reply'))
    expect(replies.map((m) => m.payload.result)).toEqual([])
    expect(await refusals(a.url, 'unsigned')).toBe(before + 1)
    // The upstream never saw the call.
    expect(await echoCalls(a.url)).toBe(calls)
  })

  it('refuses what is not a JSON object as unsigned, and goes on serving', async () => {
    const before = await refusals(a.url, 'unsigned')
    for (const text of ['42', 'null', '[1]', 'not JSON at all']) await intruder.publish(`${prefix}${captured.channel}`, text)
    await until('four refusals', async () => await refusals(a.url, 'unsigned') >= before + 4 || undefined)
    expect(await refusals(a.url, 'unsigned')).toBe(before + 4)
    const session = await RawSession.open(a.url)
    await session.request('tools/list')
    expect(JSON.stringify((await session.on(b.url).request('tools/call', { name: 'demo__echo', arguments: { text: 'still' } })).result)).toContain('still')
  })

  it('refuses a real message replayed, as replayed', async () => {
    const before = await refusals(a.url, 'replayed')
    const id = captured.payload.id
    await intruder.publish(`${prefix}${captured.channel}`, captured.text)
    // The genuine request had one reply; a replay that ran would have a second.
    const replies = await outcome('replayed', before, () => seen.filter((m) => m.payload.id === id && m.payload.type === 'reply').slice(1))
    expect(replies).toEqual([])
    expect(await refusals(a.url, 'replayed')).toBe(before + 1)
  })

  it('refuses a message signed with the right key but older than the age bound, as stale', async () => {
    const before = await refusals(a.url, 'stale')
    const channel = captured.channel.slice('bus:'.length)
    const message = forged('stale', `attacker-${randomUUID()}`)
    const signer = new SignedBus(new MemoryBus(), { key: busKey(secret), refused: () => {} })
    const sealed = signer.seal(channel, message as never, Date.now() - 120_000)
    await intruder.publish(`${prefix}${captured.channel}`, JSON.stringify(sealed))
    const replies = await outcome('stale', before, () => seen.filter((m) => m.payload.id === message.id && m.payload.type === 'reply'))
    expect(replies).toEqual([])
    expect(await refusals(a.url, 'stale')).toBe(before + 1)
  })

  it('refuses a message signed with another key, as bad_mac', async () => {
    const before = await refusals(a.url, 'bad_mac')
    const channel = captured.channel.slice('bus:'.length)
    const message = forged('other key', `attacker-${randomUUID()}`)
    const otherKey = busKey(randomBytes(32).toString('hex'))
    const sealed = new SignedBus(new MemoryBus(), { key: otherKey, refused: () => {} }).seal(channel, message as never)
    await intruder.publish(`${prefix}${captured.channel}`, JSON.stringify(sealed))
    const replies = await outcome('bad_mac', before, () => seen.filter((m) => m.payload.id === message.id && m.payload.type === 'reply'))
    expect(replies).toEqual([])
    expect(await refusals(a.url, 'bad_mac')).toBe(before + 1)
  })
})
