import { spawn } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { EventEmitter, once } from 'node:events'
import { createInterface } from 'node:readline'
import pg from 'pg'
import { pino, type Logger } from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { PostgresBus, busTables } from '../../src/store/postgres/postgres-bus.ts'
import { SignedBus, busKey } from '../../src/store/signed-bus.ts'
import { BUS, publishOn, subscribeTo } from '../../src/store/bus-channels.ts'
import type { JsonObject } from '../../src/wire/jsonrpc.ts'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'
import { PgRoundTrips } from '../helpers/pg-round-trips.ts'
import { TcpProxy } from '../helpers/tcp-proxy.ts'
import { until } from '../helpers/until.ts'

/** The machine's PostgreSQL (also on CI); POSTGRES_URL overrides it. */
const POSTGRES_URL = process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

/** What a test opened, closed after it (buses before the pools they publish on; the schema last). */
const cleanups: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A fresh schema with the bus's tables, dropped after the test; and a pool on the machine's PostgreSQL. */
async function freshSchema (): Promise<{ schema: string, pool: pg.Pool }> {
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 4 })
  const schema = `bus_test_${randomUUID().replaceAll('-', '')}`
  await pool.query(`CREATE SCHEMA ${schema}`)
  // Twice: the store runs them at every start.
  for (const statement of [...busTables(schema), ...busTables(schema)]) await pool.query(statement)
  cleanups.push(async () => {
    await pool.query(`DROP SCHEMA ${schema} CASCADE`)
    await pool.end()
  })
  return { schema, pool }
}

interface Options {
  pool?: pg.Pool
  connection?: pg.ClientConfig
  log?: Logger
}

/** The bus of one gateway process (its own pool unless given one), started; closed after the test. */
async function startBus (schema: string, options: Options = {}): Promise<PostgresBus> {
  const pool = options.pool ?? new pg.Pool({ connectionString: POSTGRES_URL, max: 4 })
  const bus = new PostgresBus({
    pool,
    connection: options.connection ?? { connectionString: POSTGRES_URL },
    schema,
    processId: randomUUID(),
    ...(options.log !== undefined && { log: options.log }),
  })
  cleanups.push(async () => {
    await bus.close()
    if (options.pool === undefined) await pool.end()
  })
  await bus.start()
  return bus
}

/** The messages a subscription receives, and an event per message. */
function listen (bus: PostgresBus, channel: string): { messages: JsonObject[], events: EventEmitter, unsubscribe: () => void } {
  const messages: JsonObject[] = []
  const events = new EventEmitter()
  const unsubscribe = bus.subscribe(channel, (message) => {
    messages.push(message)
    events.emit('message', message)
  })
  return { messages, events, unsubscribe }
}

async function nextMessage (events: EventEmitter): Promise<JsonObject> {
  const [message] = await once(events, 'message') as [JsonObject]
  return message
}

/** A logger whose lines (parsed) a test reads, with an event per line. */
function capturingLogger (): { log: Logger, lines: Array<{ msg: string }>, events: EventEmitter } {
  const lines: Array<{ msg: string }> = []
  const events = new EventEmitter()
  const log = pino({ level: 'info' }, {
    write (line: string) {
      const parsed = JSON.parse(line) as { msg: string }
      lines.push(parsed)
      events.emit('line', parsed)
    },
  })
  return { log, lines, events }
}

async function loggedLine (events: EventEmitter, text: string): Promise<void> {
  await new Promise<void>((resolve) => {
    const seen = (line: { msg: string }): void => {
      if (!line.msg.includes(text)) return
      events.off('line', seen)
      resolve()
    }
    events.on('line', seen)
  })
}

async function rowCount (pool: pg.Pool, sql: string, values: unknown[] = []): Promise<number> {
  const result = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, values)
  return result.rows[0]!.n
}

describe('the signal bus on PostgreSQL', () => {
  it('tells a publisher how many processes received a message: 0, 1, 2', async () => {
    const { schema } = await freshSchema()
    const [a, b] = [await startBus(schema), await startBus(schema)]
    expect(await a.publish('orders', { n: 0 })).toBe(0)

    const atB = listen(b, 'orders')
    await b.subscribed()
    const heard = nextMessage(atB.events)
    expect(await a.publish('orders', { n: 1 })).toBe(1)
    expect(await heard).toEqual({ n: 1 })

    const atA = listen(a, 'orders')
    await a.subscribed()
    expect(await a.publish('orders', { n: 2 })).toBe(2)
    await until('both processes heard the second message', () => (atA.messages.length === 1 && atB.messages.length === 2) || undefined)
    expect(atA.messages).toEqual([{ n: 2 }])

    // Another channel, and a channel that only shares a prefix, reach nobody.
    expect(await b.publish('order', { n: 3 })).toBe(0)
    expect(await b.publish('orders:1', { n: 3 })).toBe(0)
  })

  it('counts the publishing process\'s own subscription made just before, among thousands, without waiting on subscribed()', async () => {
    const { schema } = await freshSchema()
    const a = await startBus(schema)
    const own = listen(a, `task.v1:${randomUUID()}`)
    for (let i = 0; i < 3000; i++) a.subscribe(`task.v1:${randomUUID()}`, () => {})
    const channel = `task.v1:${randomUUID()}`
    const mine = listen(a, channel)
    expect(await a.publish(channel, { status: 'working' })).toBe(1)
    await until('the message arrived', () => mine.messages.length === 1 || undefined)
    expect(own.messages).toEqual([])
  })

  it('carries a 1 MB message to every process listening, and keeps no copy once each read it', async () => {
    const { schema, pool } = await freshSchema()
    const [a, b, c] = [await startBus(schema), await startBus(schema), await startBus(schema)]
    const big = { text: randomBytes(512 * 1024).toString('hex'), tail: 'é✓' }
    const atB = listen(b, 'peer.v1:b')
    await b.subscribed()
    const heard = nextMessage(atB.events)
    expect(await a.publish('peer.v1:b', big)).toBe(1)
    expect(await heard).toEqual(big)
    await until('the stored message is deleted', async () => await rowCount(pool, `${schema}.bus_messages`) === 0 || undefined)

    const atC = listen(c, 'peer.v1:b')
    await c.subscribed()
    const both = Promise.all([nextMessage(atB.events), nextMessage(atC.events)])
    expect(await a.publish('peer.v1:b', big)).toBe(2)
    expect(await both).toEqual([big, big])
    await until('the stored message is deleted', async () => await rowCount(pool, `${schema}.bus_messages`) === 0 || undefined)
  })

  it('delivers messages right at the size where a notification stops being enough', async () => {
    const { schema } = await freshSchema()
    const [a, b] = [await startBus(schema), await startBus(schema)]
    const channel = 'edge'
    const atB = listen(b, channel)
    await b.subscribed()
    // ["edge",{"s":"…"}] is 17 bytes around the string.
    const sizes = [7998, 7999, 8000, 8001]
    for (const size of sizes) expect(await a.publish(channel, { s: 'x'.repeat(size - 17) })).toBe(1)
    await until('every message arrived', () => atB.messages.length === sizes.length || undefined)
    expect(atB.messages.map((message) => JSON.stringify(['edge', message]).length)).toEqual(sizes)
  })

  it('delivers 1000 messages of one publisher on one channel in the order they were published, long ones among them', async () => {
    const { schema } = await freshSchema()
    const [a, b] = [await startBus(schema), await startBus(schema)]
    const atB = listen(b, 'stream')
    await b.subscribed()
    const counts = await Promise.all(Array.from({ length: 1000 }, async (_, n) =>
      await a.publish('stream', n % 100 === 7 ? { n, pad: 'p'.repeat(9000) } : { n })))
    expect(counts.every((count) => count === 1)).toBe(true)
    await until('all 1000 arrived', () => atB.messages.length === 1000 || undefined, { describeLast: () => ` (${atB.messages.length})` })
    expect(atB.messages.map((message) => message.n)).toEqual(Array.from({ length: 1000 }, (_, n) => n))
  })

  it('a subscription confirmed by subscribed() hears the next publish of another process, every time', async () => {
    const { schema } = await freshSchema()
    const [a, b] = [await startBus(schema), await startBus(schema)]
    for (let i = 0; i < 50; i++) {
      const channel = `input.v1:${randomUUID()}`
      const atB = listen(b, channel)
      await b.subscribed()
      const heard = nextMessage(atB.events)
      expect(await a.publish(channel, { key: channel })).toBe(1)
      await heard
      atB.unsubscribe()
    }
  })

  it('publishes in one round trip, and subscribes thousands of channels in a few', async () => {
    const { schema } = await freshSchema()
    const proxy = new PgRoundTrips({ host: '127.0.0.1', port: 5432 })
    const port = await proxy.listen()
    cleanups.push(async () => await proxy.close())
    const through = `postgres://postgres@127.0.0.1:${port}/postgres`
    const pool = new pg.Pool({ connectionString: through, max: 1 })
    cleanups.push(async () => await pool.end())
    const a = await startBus(schema, { pool })
    const b = await startBus(schema, { connection: { connectionString: through } })
    const atB = listen(b, 'ping')
    await b.subscribed()

    const before = proxy.count
    expect(await a.publish('ping', { n: 1 })).toBe(1)
    expect(await a.publish('ping', { n: 2, pad: 'p'.repeat(20_000) })).toBe(1)
    expect(await a.publish('nobody', { n: 3 })).toBe(0)
    await until('both messages arrived', () => atB.messages.length === 2 || undefined)
    // Two round trips on b's LISTEN connection: reading the stored message, and deleting it.
    await until('the stored message is deleted', async () => proxy.count - before === 5 || undefined, { describeLast: () => ` (${proxy.count - before})` })

    const subscribing = proxy.count
    const unsubscribes = Array.from({ length: 5000 }, (_, i) => b.subscribe(`task.v1:${i}-${randomUUID()}`, () => {}))
    await b.subscribed()
    expect(proxy.count - subscribing).toBeLessThanOrEqual(5)
    expect(await rowCount(pool, `${schema}.bus_listeners`)).toBe(5001)
    const unsubscribing = proxy.count
    for (const unsubscribe of unsubscribes) unsubscribe()
    await b.subscribed()
    expect(proxy.count - unsubscribing).toBeLessThanOrEqual(5)
    expect(await rowCount(pool, `${schema}.bus_listeners`)).toBe(1)
  })

  it('reconnects by itself when its LISTEN connection is terminated, and listens to everything again', async () => {
    const { schema, pool } = await freshSchema()
    const { log, lines, events } = capturingLogger()
    const a = await startBus(schema)
    const b = await startBus(schema, { log })
    const channels = Array.from({ length: 1500 }, (_, i) => `task.v1:${i}`)
    const heard: string[] = []
    for (const channel of channels) b.subscribe(channel, () => heard.push(channel))
    await b.subscribed()
    const { rows: [before] } = await pool.query<{ pid: number }>(`SELECT pid FROM ${schema}.bus_processes p JOIN ${schema}.bus_listeners l USING (process) WHERE l.channel = 'task.v1:0'`)

    const lost = loggedLine(events, 'bus connection lost')
    const restored = loggedLine(events, 'bus connection restored')
    await pool.query('SELECT pg_terminate_backend($1)', [before!.pid])
    await lost
    // Made while the connection is lost: registered on the next one.
    const during = listen(b, 'during')
    await restored
    await b.subscribed()

    expect(await a.publish('task.v1:1499', {})).toBe(1)
    expect(await a.publish('during', { n: 1 })).toBe(1)
    await until('both arrived', () => (heard.length === 1 && during.messages.length === 1) || undefined)
    const { rows: [after] } = await pool.query<{ pid: number }>(`SELECT pid FROM ${schema}.bus_processes p JOIN ${schema}.bus_listeners l USING (process) WHERE l.channel = 'task.v1:0'`)
    expect(after!.pid).not.toBe(before!.pid)
    expect(await rowCount(pool, `${schema}.bus_listeners`)).toBe(1501)
    expect(lines.map((line) => line.msg)).toEqual([
      expect.stringContaining('bus connection lost'),
      expect.stringContaining('bus connection restored'),
    ])
  })

  it('while PostgreSQL is unreachable, resolves publishes with 0 and subscribed() at once, and takes every subscription when it is back', async () => {
    const { schema } = await freshSchema()
    const proxy = await TcpProxy.start(POSTGRES_URL)
    cleanups.push(async () => await proxy.close())
    const through = `postgres://postgres@127.0.0.1:${proxy.port}/postgres`
    const pool = new pg.Pool({ connectionString: through, max: 2 })
    // An idle connection of the pool that is cut is reported here (the store listens the same way).
    pool.on('error', () => {})
    cleanups.push(async () => await pool.end())
    const { log, lines, events } = capturingLogger()
    const a = await startBus(schema)
    const b = await startBus(schema, { pool, connection: { connectionString: through }, log })
    const before = listen(b, 'before')
    await b.subscribed()
    expect(await a.publish('before', { n: 0 })).toBe(1)
    await until('the first message arrived', () => before.messages.length === 1 || undefined)

    const lost = loggedLine(events, 'bus connection lost')
    await proxy.cut('refuse')
    await lost
    const during = listen(b, 'during')
    await b.subscribed()
    expect(await b.publish('during', { n: -1 })).toBe(0)
    // The server notices by itself that b's connection is gone; nothing announces when.
    await until('b is no longer counted', async () => await a.publish('before', { n: -1 }) === 0 || undefined)

    const restored = loggedLine(events, 'bus connection restored')
    await proxy.restore()
    await restored
    await b.subscribed()
    expect(await a.publish('during', { n: 1 })).toBe(1)
    expect(await a.publish('before', { n: 2 })).toBe(1)
    expect(await b.publish('before', { n: 3 })).toBe(1)
    await until('the messages arrived', () => (during.messages.length === 1 && before.messages.length === 3) || undefined, { describeLast: () => ` (${JSON.stringify([during.messages, before.messages])})` })
    expect(before.messages).toEqual([{ n: 0 }, { n: 2 }, { n: 3 }])
    expect(lines.map((line) => line.msg)).toEqual([
      expect.stringContaining('bus connection lost'),
      expect.stringContaining('bus connection restored'),
    ])
  })

  it('does not count a process killed with -9, and the next process to start deletes its rows', async () => {
    const { schema, pool } = await freshSchema()
    const a = await startBus(schema)
    const processId = randomUUID()
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/postgres-bus-process.ts', POSTGRES_URL, schema, processId, 'watched'], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const exited = once(child, 'exit')
    cleanups.push(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    })
    const output = new EventEmitter()
    createInterface({ input: child.stdout }).on('line', (line) => output.emit('line', { msg: line }))
    await loggedLine(output, 'ready')
    const heard = loggedLine(output, 'heard {"n":1}')
    expect(await a.publish('watched', { n: 1 })).toBe(1)
    await heard

    child.kill('SIGKILL')
    await exited
    // The server notices the closed connection by itself; nothing announces when.
    await until('the killed process is no longer counted', async () => await a.publish('watched', { n: 2 }) === 0 || undefined)
    expect(await rowCount(pool, `${schema}.bus_processes WHERE process = $1`, [processId])).toBe(1)

    await startBus(schema)
    expect(await rowCount(pool, `${schema}.bus_processes WHERE process = $1`, [processId])).toBe(0)
    expect(await rowCount(pool, `${schema}.bus_listeners WHERE process = $1`, [processId])).toBe(0)
  })

  it('stops counting a process for a channel when its last handler goes, and for everything once it is closed', async () => {
    const { schema, pool } = await freshSchema()
    const [a, b] = [await startBus(schema), await startBus(schema)]
    const first = listen(b, 'events')
    const second = listen(b, 'events')
    listen(b, 'other')
    await b.subscribed()
    first.unsubscribe()
    await b.subscribed()
    expect(await a.publish('events', { n: 1 })).toBe(1)
    await until('the remaining handler heard it', () => second.messages.length === 1 || undefined)
    expect(first.messages).toEqual([])
    second.unsubscribe()
    await b.subscribed()
    expect(await a.publish('events', { n: 2 })).toBe(0)
    expect(await a.publish('other', { n: 3 })).toBe(1)

    await b.close()
    expect(await a.publish('other', { n: 4 })).toBe(0)
    expect(await b.publish('other', { n: 5 })).toBe(0)
    expect(await rowCount(pool, `${schema}.bus_processes`)).toBe(1)
    expect(await rowCount(pool, `${schema}.bus_listeners`)).toBe(0)
  })

  it('drops notifications that no bus wrote, and keeps delivering what comes after them', async () => {
    const { schema, pool } = await freshSchema()
    const [a, b] = [await startBus(schema), await startBus(schema)]
    const atB = listen(b, 'x')
    b.subscribe('x', () => { throw new Error('a handler that throws') })
    await b.subscribed()
    const { rows: [row] } = await pool.query<{ pg_channel: string }>(`SELECT DISTINCT pg_channel FROM ${schema}.bus_processes p JOIN ${schema}.bus_listeners l USING (process)`)
    for (const payload of ['not json', '{"x":1}', '["x"]', '999999999', '["x",5]']) await pool.query('SELECT pg_notify($1, $2)', [row!.pg_channel, payload])
    expect(await a.publish('x', { n: 1 })).toBe(1)
    await until('the real message arrived', () => atB.messages.length === 2 || undefined)
    // A message that is not an object reaches the handlers as {}: the signed bus above refuses it as unsigned.
    expect(atB.messages).toEqual([{}, { n: 1 }])
  })

  it('carries signed envelopes between processes, a 1 MB peer reply among them', async () => {
    const { schema } = await freshSchema()
    const key = busKey('a secret both processes share')
    const refused: string[] = []
    const options = { key, refused: (reason: string) => { refused.push(reason) } }
    const a = new SignedBus(await startBus(schema), options)
    const b = new SignedBus(await startBus(schema), options)
    const taskId = randomUUID()
    const statuses: string[] = []
    const replies: JsonObject[] = []
    subscribeTo(b, BUS.task, taskId, (payload) => statuses.push(payload.status))
    subscribeTo(b, BUS.peer, 'b', (payload) => { if (payload.type === 'reply') replies.push(payload.result ?? {}) })
    await b.subscribed()
    expect(await publishOn(a, BUS.task, taskId, { type: 'status', status: 'completed' })).toBe(1)
    const result = { content: [{ type: 'text', text: randomBytes(512 * 1024).toString('base64') }] }
    expect(await publishOn(a, BUS.peer, 'b', { type: 'reply', id: '1', result })).toBe(1)
    await until('both arrived', () => (statuses.length === 1 && replies.length === 1) || undefined)
    expect(statuses).toEqual(['completed'])
    expect(replies).toEqual([result])
    expect(refused).toEqual([])
  })
})
