import { fetch as undiciFetch } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { demoStdioYaml, loggedLine, startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { legacyTask, next, RawSession } from '../helpers/raw-session.ts'
import { STATE_SECRET } from '../helpers/redis.ts'
import { privateRedis, stopRedis, type PrivateRedis } from '../helpers/private-redis.ts'
import { readSse } from '../helpers/sse.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

const LOST_BY_STORE = -32071
const NOT_FOUND = -32602

async function readyz (gateway: GatewayProcess): Promise<Json> {
  const res = await undiciFetch(new URL('/readyz', gateway.url))
  return await res.json() as Json
}

/** A subscriptions/listen stream of `client` for one task: the first message that `match`es. */
async function listenTo (url: string, client: ModernRaw, taskId: string): Promise<(match: (m: Json) => boolean) => Promise<Json>> {
  const res = await undiciFetch(url, {
    method: 'POST',
    signal: AbortSignal.timeout(120_000),
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'subscriptions/listen' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'subscriptions/listen', params: client.envelope({ notifications: { taskIds: [taskId] } }) }),
  })
  const events = readSse(res.body as ReadableStream<Uint8Array>)
  return async (match) => {
    for (;;) {
      const { value, done } = await events.next()
      if (done) throw new Error('the listen stream ended')
      if (value.data === '') continue
      const message = JSON.parse(value.data) as Json
      if (match(message)) return message
    }
  }
}

/** The parsed error log line of a loss found after log line `from`. */
async function lossLogged (gateway: GatewayProcess, from: number): Promise<Json> {
  return JSON.parse(await loggedLine(gateway, 'The store lost its data', { from })) as Json
}

/**
 * A Redis emptied under the gateway (FLUSHALL, or a restart without persistence) is noticed: an error log with
 * the tasks this process knew, a waiting tasks/result ended with the store's loss, tasks/get of a known id
 * answering that the store lost it, the outcome of a task still running logged, and the gateway serving on.
 */
describe('a Redis emptied under the gateway', () => {
  let redis: PrivateRedis | undefined
  let a: GatewayProcess | undefined
  let b: GatewayProcess | undefined

  beforeAll(async () => {
    redis = await privateRedis('noeviction')
    // A short shutdown grace: the task process B still runs for the store it lost is not waited for at the end.
    const file = writeConfig(`
store: { kind: redis, url: ${JSON.stringify(redis.url)}, prefix: 'gw:' }
server: { stateSecret: ${JSON.stringify(STATE_SECRET)}, shutdownGrace: 1s }
logging: { level: info }
tasks: { pollInterval: 50ms, decide: always, ownerLease: 3s }
upstreams:
${demoStdioYaml()}
`)
    ;[a, b] = await Promise.all([startGatewayProcess(file), startGatewayProcess(file)])
  })

  afterAll(async () => {
    await stopAll([a, b].filter((g): g is GatewayProcess => g !== undefined))
    await stopRedis(redis)
  })

  it('is noticed after FLUSHALL: tasks known are reported lost, waiters end, new tasks work', async () => {
    const modern = ModernRaw.withTasks(a!.url)
    const done = String((await modern.result('tools/call', { name: 'demo__slow', arguments: { duration: 10, steps: 1 } })).taskId)
    await modern.waitFor(done, ['completed'])
    // Ends after the flush: its outcome has no record to go to.
    const running = String((await modern.result('tools/call', { name: 'demo__slow', arguments: { duration: 6000, steps: 60 } })).taskId)
    await modern.waitFor(running, ['working'])
    const listened = await listenTo(a!.url, modern, running)
    // Subscribed once the task's current state arrives.
    await listened((m) => m.method === 'notifications/tasks' && (m.params as Json).status === 'working')
    // A blocking tasks/result on process B, for a task B runs.
    const legacy = await RawSession.open(b!.url)
    const waited = await legacyTask(legacy, 'demo__slow', { duration: 60_000, steps: 600 })
    await legacy.waitFor(waited, ['working'])
    const getStream = await legacy.stream('get', AbortSignal.timeout(120_000))
    // Once its stream is open, the request waits in its handler (its session was read before the flush).
    const result = await legacy.stream({ taskResult: waited }, AbortSignal.timeout(120_000))
    const [fromA, fromB] = [a!.lines.length, b!.lines.length]

    await redis!.client.flushall()

    const [lossA, lossB] = await Promise.all([lossLogged(a!, fromA), lossLogged(b!, fromB)])
    expect(lossA.level).toBe(50)
    expect(lossA.reason).toMatch(/Redis was emptied/)
    expect(lossA.lostTasks).toBeGreaterThanOrEqual(2)
    expect(lossA.runningHere).toBe(1)
    expect(lossA.taskIds).toEqual(expect.arrayContaining([done, running]))
    expect(lossB.lostTasks).toBeGreaterThanOrEqual(1)

    const ended = await next(result, (message) => message.id !== undefined)
    expect(ended.error).toMatchObject({ code: LOST_BY_STORE, message: expect.stringMatching(new RegExp(`task '${waited}' was lost by the store: Redis was emptied`)) })

    // The session's GET stream shows the task it ran as failed, with the same message.
    const shown = await next(getStream, (message) => message.method === 'notifications/tasks/status' && (message.params as Json).taskId === waited && (message.params as Json).status === 'failed')
    expect(shown.params).toMatchObject({ status: 'failed', statusMessage: expect.stringMatching(/was lost by the store: Redis was emptied/) })

    // A subscriptions/listen stream waiting on a task shows it failed, lost by the store.
    const lostShown = await listened((m) => m.method === 'notifications/tasks' && (m.params as Json).status === 'failed')
    expect(lostShown.params).toMatchObject({ taskId: running, error: { code: LOST_BY_STORE, message: expect.stringContaining('was lost by the store') } })

    const lost = await modern.request('tasks/get', { taskId: done })
    expect(lost.body.error).toMatchObject({ code: LOST_BY_STORE, message: expect.stringContaining('was lost by the store') })
    // Process B never knew that task: it cannot tell it from an unknown id.
    expect((await ModernRaw.withTasks(b!.url).request('tasks/get', { taskId: done })).body.error).toMatchObject({ code: NOT_FOUND })

    const dropped = JSON.parse(await loggedLine(a!, (line) => line.includes('the store no longer holds the task') && line.includes(running), { from: fromA, timeoutMs: 60_000 })) as Json
    expect(dropped).toMatchObject({ level: 50, taskId: running, upstream: 'demo', tool: 'slow', status: 'completed' })

    // A new epoch is written, /readyz mentions the loss, and new tasks work.
    expect(await redis!.client.get('gw:epoch')).toEqual(expect.any(String))
    expect(((await readyz(a!)).store as Json).warning).toMatch(/Redis was emptied .* tasks and sessions stored before then are gone/)
    const after = String((await modern.result('tools/call', { name: 'demo__slow', arguments: { duration: 10, steps: 1 } })).taskId)
    expect((await modern.waitFor(after, ['completed'])).status).toBe('completed')
  })

  it('is noticed after a restart of Redis without persistence on the same port', async () => {
    const modern = ModernRaw.withTasks(a!.url)
    const done = String((await modern.result('tools/call', { name: 'demo__slow', arguments: { duration: 10, steps: 1 } })).taskId)
    await modern.waitFor(done, ['completed'])
    const fromA = a!.lines.length
    const port = redis!.port
    await stopRedis(redis)
    redis = await privateRedis('noeviction', port)

    const loss = await lossLogged(a!, fromA)
    expect(loss.taskIds).toEqual(expect.arrayContaining([done]))
    const lost = await until('tasks/get answers that the store lost the task', async () => {
      const reply = await modern.request('tasks/get', { taskId: done })
      return (reply.body.error as Json | undefined)?.code === LOST_BY_STORE ? reply : undefined
    })
    expect((lost.body.error as Json).message).toMatch(/was lost by the store: Redis was emptied/)
    const after = String((await modern.result('tools/call', { name: 'demo__slow', arguments: { duration: 10, steps: 1 } })).taskId)
    expect((await modern.waitFor(after, ['completed'])).status).toBe('completed')
  })
})
