import { randomUUID } from 'node:crypto'
import { fetch as undiciFetch } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { JsonObject } from '../../src/wire/jsonrpc.ts'
import { RedisStore } from '../../src/store/redis/redis-store.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { demoStdioYaml, startGatewayProcess, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { next, RawSession } from '../helpers/raw-session.ts'
import { purge, REDIS_URL, STATE_SECRET } from '../helpers/redis.ts'
import { TcpProxy, type CutMode } from '../helpers/tcp-proxy.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const STORE_DOWN = { code: -32603, message: 'the store is unavailable: Redis is unreachable', data: { code: 'GW_ERR_STORE_UNAVAILABLE' } }

async function readyz (gateway: GatewayProcess): Promise<{ status: number, body: Json }> {
  const res = await undiciFetch(new URL('/readyz', gateway.url))
  return { status: res.status, body: await res.json() as Json }
}

function taskIdOf (response: Json): string {
  return ((response.result as Json).task as Json).taskId as string
}

/** Parsed log lines of a gateway process with this message. */
function logged (gateway: GatewayProcess, msg: string): Json[] {
  return gateway.lines.filter((l) => l.includes(msg)).map((l) => JSON.parse(l) as Json)
}

/** Lines that say a promise rejection went unhandled or an exception uncaught. */
function crashes (gateway: GatewayProcess): string[] {
  return gateway.lines.filter((l) => /unhandled|uncaught/i.test(l))
}

/**
 * Two real gateway processes whose Redis connections go through a TCP proxy that the test cuts: while
 * Redis is unreachable every request gets a precise error and nothing crashes; once it is back the
 * processes reconnect by themselves and nothing stored, or finished during the outage, is lost.
 */
describe.each<CutMode>(['refuse', 'blackhole'])('Redis outage (new connections: %s)', (mode) => {
  const prefix = `mcpgw-outage:${randomUUID()}:`
  let proxy: TcpProxy
  let a: GatewayProcess
  let b: GatewayProcess

  beforeAll(async () => {
    proxy = await TcpProxy.start(REDIS_URL)
    const file = writeConfig(`
store: { kind: redis, url: ${JSON.stringify(proxy.url)}, prefix: ${JSON.stringify(prefix)} }
server: { stateSecret: ${JSON.stringify(STATE_SECRET)} }
logging: { level: info }
tasks: { pollInterval: 50ms, decide: always }
upstreams:
${demoStdioYaml()}
`)
    ;[a, b] = await Promise.all([startGatewayProcess(file), startGatewayProcess(file)])
  })

  afterAll(async () => {
    await proxy?.restore()
    await Promise.all([a, b].map(async (gateway) => {
      if (!gateway) return
      gateway.child.kill('SIGTERM')
      const timer = setTimeout(() => gateway.child.kill('SIGKILL'), 10_000)
      await gateway.exited
      clearTimeout(timer)
    }))
    await proxy?.close()
    await purge(prefix)
  })

  it('answers with precise errors while Redis is unreachable and loses nothing once it is back', async () => {
    // Before the outage, all on process A: a legacy session with a completed task, a completed modern
    // task, a task waiting for input, one whose upstream stops waiting for input during the outage, one
    // whose upstream call ends during the outage, and one that outlives it.
    const legacy = await RawSession.open(a.url, { elicitation: { form: {} } })
    const modern = ModernRaw.withTasks(a.url)
    const done = taskIdOf(await legacy.request('tools/call', { name: 'demo__slow', arguments: { duration: 10, steps: 1 }, task: {} }))
    await legacy.waitFor(done, ['completed'])
    const doneResult = await legacy.request('tasks/result', { taskId: done })
    expect(JSON.stringify(doneResult.result)).toContain('slow finished')
    const modernDone = String((await modern.result('tools/call', { name: 'demo__slow', arguments: { duration: 10, steps: 1 } })).taskId)
    const modernDoneTask = await modern.waitFor(modernDone, ['completed'])
    const waiting = taskIdOf(await legacy.request('tools/call', { name: 'demo__ask_user', arguments: { message: 'Still there?' }, task: {} }))
    await legacy.waitFor(waiting, ['input_required'])
    const outlives = taskIdOf(await legacy.request('tools/call', { name: 'demo__slow', arguments: { duration: 60_000, steps: 600 }, task: {} }))
    await legacy.waitFor(outlives, ['working'])
    const during = taskIdOf(await legacy.request('tools/call', { name: 'demo__slow', arguments: { duration: 1500, steps: 1 }, task: {} }))
    const givesUp = taskIdOf(await legacy.request('tools/call', { name: 'demo__ask_user', arguments: { timeoutMs: 1500 }, task: {} }))
    await legacy.waitFor(givesUp, ['input_required'])
    expect((await readyz(a)).status).toBe(200)

    await proxy.cut(mode)

    // Legacy requests fail before a handler runs (their session lives in the store): HTTP 503 with a
    // JSON-RPC error that answers the request's id, and Retry-After.
    const get = await legacy.post({ jsonrpc: '2.0', id: 41, method: 'tasks/get', params: { taskId: done } })
    expect(get.status).toBe(503)
    expect(get.headers.get('retry-after')).toBe('1')
    expect(await get.json()).toEqual({ jsonrpc: '2.0', id: 41, error: STORE_DOWN })
    const init = await new RawSession(b.url).post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'outage', version: '1' } } })
    expect(init.status).toBe(503)
    expect(await init.json()).toEqual({ jsonrpc: '2.0', id: 1, error: STORE_DOWN })
    const stream = await undiciFetch(legacy.url, { headers: { accept: 'text/event-stream', 'mcp-session-id': legacy.sessionId } })
    expect(stream.status).toBe(503)
    expect(await stream.json()).toEqual({ jsonrpc: '2.0', id: null, error: STORE_DOWN })

    // Modern requests have no session: the handler runs and answers with a JSON-RPC error in a 200.
    const modernGet = await modern.request('tasks/get', { taskId: modernDone })
    expect(modernGet.status).toBe(200)
    expect(modernGet.body).toEqual({ jsonrpc: '2.0', id: expect.any(Number), error: STORE_DOWN })
    expect((await modern.request('tools/call', { name: 'demo__slow', arguments: { duration: 10, steps: 1 } })).body.error).toEqual(STORE_DOWN)
    // What needs no store still works: a synchronous call of a client without the tasks extension.
    const echo = await new ModernRaw(a.url).request('tools/call', { name: 'demo__echo', arguments: { text: 'no store needed' } })
    expect(echo.body.result).toMatchObject({ content: [{ text: 'no store needed' }] })

    for (const gateway of [a, b]) {
      const ready = await readyz(gateway)
      expect(ready.status).toBe(503)
      expect(ready.body).toMatchObject({ status: 'unavailable', store: { ok: false, kind: 'redis', detail: STORE_DOWN.message } })
    }

    // The upstream calls of `during` and `givesUp` end while Redis is unreachable: A keeps their outcomes.
    await until('both outcomes to wait for the store', async () => {
      const ids = logged(a, 'could not store the outcome of a task').map((l) => l.taskId)
      return ids.includes(during) && ids.includes(givesUp) ? true : undefined
    })
    // Kept, neither stored nor given up, until Redis is back: nothing lost, nothing stored before it could be.
    expect(logged(a, 'stored the outcome of a task that ended while it was unavailable')).toEqual([])
    expect(logged(a, 'lost the outcome of a task')).toEqual([])
    expect(logged(a, 'it failed with a message naming the store instead')).toEqual([])

    await proxy.restore()
    for (const gateway of [a, b]) await until('/readyz to be 200 again', async () => (await readyz(gateway)).status === 200 || undefined)
    // Each process told its operator once that Redis was gone and once that it is back, not once per retry.
    for (const gateway of [a, b]) {
      await until('the process to log that Redis is back', async () => logged(gateway, 'Redis connection restored').length > 0 || undefined)
      expect(logged(gateway, 'Redis connection lost')).toHaveLength(1)
      expect(logged(gateway, 'Redis connection restored')).toHaveLength(1)
    }

    // Stored before the outage: intact.
    expect((await legacy.request('tasks/result', { taskId: done })).result).toEqual(doneResult.result)
    expect(await modern.result('tasks/get', { taskId: modernDone })).toEqual(modernDoneTask)
    // Ended during the outage: stored once Redis was back, readable from either process.
    expect((await legacy.waitFor(during, ['completed', 'failed'])).status).toBe('completed')
    expect(JSON.stringify((await legacy.on(b.url).request('tasks/result', { taskId: during })).result)).toContain('slow finished: 1 steps in 1500 ms')
    const gaveUp = await legacy.waitFor(givesUp, ['completed', 'failed'])
    expect(gaveUp).toMatchObject({ status: 'failed', statusMessage: expect.stringContaining('elicitation/create failed') })
    await until('A to log that it stored both outcomes', async () => {
      const ids = logged(a, 'stored the outcome of a task that ended while it was unavailable').map((l) => l.taskId)
      return ids.includes(during) && ids.includes(givesUp) ? true : undefined
    })

    // The task waiting for input still waits; its answer, posted to B, reaches the call A runs (A's
    // subscription to the input's channel was made before the outage).
    const viaB = legacy.on(b.url)
    const results = await viaB.stream({ taskResult: waiting }, AbortSignal.timeout(20_000))
    const request = await next(results, (m) => m.method === 'elicitation/create')
    expect((request.params as Json).message).toBe('Still there?')
    expect((await viaB.post({ jsonrpc: '2.0', id: request.id, result: { action: 'accept', content: { name: 'Ada' } } })).status).toBe(202)
    expect(JSON.stringify((await next(results, (m) => 'result' in m)).result)).toContain('Hello, Ada!')

    // New tasks work in both eras.
    const fresh = taskIdOf(await viaB.request('tools/call', { name: 'demo__slow', arguments: { duration: 10, steps: 1 }, task: {} }))
    expect((await legacy.waitFor(fresh, ['completed'])).status).toBe('completed')
    const modernFresh = String((await modern.result('tools/call', { name: 'demo__slow', arguments: { duration: 10, steps: 1 } })).taskId)
    expect((await modern.waitFor(modernFresh, ['completed'])).status).toBe('completed')

    // A cancel served by B reaches the call A runs (subscribed before the outage as well).
    expect((await viaB.request('tasks/cancel', { taskId: outlives })).result).toMatchObject({ status: 'cancelled' })
    await until('process A to stop the cancelled upstream call', async () => a.lines.some((l) => l.includes('slow: cancelled')) || undefined)

    for (const gateway of [a, b]) {
      expect(gateway.child.exitCode).toBeNull()
      expect(crashes(gateway)).toEqual([])
    }
  }, 60_000)
})

describe('the signal bus across a Redis outage', () => {
  it('takes a subscription made while Redis was unreachable once it is back', async () => {
    const prefix = `mcpgw-outage-bus:${randomUUID()}:`
    const proxy = await TcpProxy.start(REDIS_URL)
    const cut = new RedisStore({ url: proxy.url, prefix })
    const direct = new RedisStore({ url: REDIS_URL, prefix })
    try {
      await Promise.all([cut.ready(), direct.ready()])
      const received: JsonObject[] = []
      cut.bus.subscribe('before', (message) => received.push(message))
      await until('the first subscription', async () => (await direct.bus.publish('before', { n: 0 })) === 1 || undefined)
      await until('the first message', async () => received.length === 1 || undefined)

      await proxy.cut('refuse')
      cut.bus.subscribe('during', (message) => received.push(message))
      // A publish waits for pending subscriptions: once it resolves, the SUBSCRIBE above has failed.
      expect(await cut.bus.publish('during', { n: -1 })).toBe(0)
      await proxy.restore()

      await until('the subscription made during the outage', async () => (await direct.bus.publish('during', { n: 1 })) === 1 || undefined)
      await until('the subscription made before the outage', async () => (await direct.bus.publish('before', { n: 2 })) === 1 || undefined)
      await until('both messages', async () => received.length === 3 || undefined)
      expect(received).toEqual([{ n: 0 }, { n: 1 }, { n: 2 }])
    } finally {
      await Promise.all([cut.close(), direct.close()])
      await proxy.close()
      await purge(prefix)
    }
  })
})
