import { fetch as undiciFetch } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { demoStdioYaml, loggedLine, startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { STATE_SECRET } from '../helpers/redis.ts'
import { privateRedis, stopRedis, type PrivateRedis } from '../helpers/private-redis.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { until } from '../helpers/until.ts'

type Json = Record<string, unknown>

async function readyz (gateway: GatewayProcess): Promise<{ status: number, body: Json }> {
  const res = await undiciFetch(new URL('/readyz', gateway.url))
  return { status: res.status, body: await res.json() as Json }
}

async function startOn (url: string): Promise<GatewayProcess> {
  return await startGatewayProcess(writeConfig(`
store: { kind: redis, url: ${JSON.stringify(url)}, prefix: 'gw:' }
server: { stateSecret: ${JSON.stringify(STATE_SECRET)} }
logging: { level: info }
tasks: { pollInterval: 50ms, decide: always }
upstreams:
${demoStdioYaml()}
`))
}

/** Fills Redis until it refuses even a small write (a large one also counts its own request buffer); returns how many keys. */
async function fill (redis: PrivateRedis): Promise<number> {
  let filled = 0
  for (const size of [64 * 1024, 1024, 16]) {
    for (;;) {
      try {
        await redis.client.set(`fill:${filled}`, 'x'.repeat(size))
        filled++
      } catch (err) {
        expect((err as Error).message).toMatch(/^OOM/)
        break
      }
    }
  }
  return filled
}

async function free (redis: PrivateRedis, filled: number): Promise<void> {
  if (filled > 0) await redis.client.del(...Array.from({ length: filled }, (_, i) => `fill:${i}`))
}

/**
 * A Redis at `maxmemory` under `noeviction` refuses every write: the gateway is then not ready, says why,
 * and is ready again as soon as Redis accepts writes.
 */
describe('a Redis that refuses writes', () => {
  let redis: PrivateRedis | undefined
  let gateway: GatewayProcess | undefined

  beforeAll(async () => {
    redis = await privateRedis('noeviction')
    gateway = await startOn(redis.url)
  })

  afterAll(async () => {
    if (gateway) await stopAll([gateway])
    await stopRedis(redis)
  })

  it('makes /readyz answer 503 naming the store and the reason, and 200 once memory is freed', async () => {
    expect((await readyz(gateway!)).status).toBe(200)
    const filled = await fill(redis!)
    // Kept full whatever its transient buffers do (a loaded machine frees the fill's own buffers late): the limit goes
    // below what it holds.
    await redis!.client.config('SET', 'maxmemory', '1mb')
    const refused = await readyz(gateway!)
    expect(refused.status).toBe(503)
    expect(refused.body.status).toBe('unavailable')
    const store = refused.body.store as Json
    expect(store.ok).toBe(false)
    expect(store.kind).toBe('redis')
    expect(store.detail).toMatch(/Redis refuses writes: it is out of memory/)
    await loggedLine(gateway!, 'The store refuses writes')

    await free(redis!, filled)
    await redis!.client.config('SET', 'maxmemory', '2mb')
    const back = await until('/readyz answers 200 again', async () => {
      const answer = await readyz(gateway!)
      return answer.status === 200 ? answer : undefined
    })
    expect(back.body.store).toEqual({ ok: true, kind: 'redis' })
    await loggedLine(gateway!, 'The store accepts writes again')
  })

  it('stores the outcome of a task that ended while Redis was full once memory is freed: completed with its result, never "restarted"', async () => {
    const modern = ModernRaw.withTasks(gateway!.url)
    const taskId = String((await modern.result('tools/call', { name: 'demo__slow', arguments: { duration: 8000, steps: 8 } })).taskId)
    await modern.waitFor(taskId, ['working'])
    const from = gateway!.lines.length
    const filled = await fill(redis!)
    // Kept full whatever its transient buffers do: the limit goes below what it holds.
    await redis!.client.config('SET', 'maxmemory', '1mb')
    // The task ends while Redis is full: its outcome is refused, and retried.
    const refused = JSON.parse(await loggedLine(gateway!, (line) => line.includes('could not store the outcome of a task') && line.includes(taskId), { from, timeoutMs: 60_000 })) as Json
    expect(refused).toMatchObject({ status: 'completed', tool: 'slow' })
    await free(redis!, filled)
    await redis!.client.config('SET', 'maxmemory', '2mb')
    const task = await modern.waitFor(taskId, ['completed', 'failed'])
    expect(task.status).toBe('completed')
    expect(JSON.stringify(task)).toContain('slow finished: 8 steps in 8000 ms')
    expect(JSON.stringify(task)).not.toMatch(/restarted/)
    await loggedLine(gateway!, (line) => line.includes('the store is back: stored the outcome') && line.includes(taskId), { from })
  })
})

/** A Redis that evicts keys to make room can lose acknowledged tasks: that is logged as an error and shown in /readyz. */
describe('a Redis whose maxmemory-policy evicts keys', () => {
  let redis: PrivateRedis | undefined
  let gateway: GatewayProcess | undefined

  beforeAll(async () => {
    redis = await privateRedis('allkeys-lru')
    gateway = await startOn(redis.url)
  })

  afterAll(async () => {
    if (gateway) await stopAll([gateway])
    await stopRedis(redis)
  })

  it('is reported at start (error log) and in /readyz, and again when the policy changes', async () => {
    const line = JSON.parse(await loggedLine(gateway!, 'Redis evicts keys')) as Json
    expect(line.level).toBe(50) // error
    expect(line.maxmemoryPolicy).toBe('allkeys-lru')

    const answer = await readyz(gateway!)
    expect(answer.status).toBe(200)
    expect((answer.body.store as Json).warning).toMatch(/maxmemory-policy allkeys-lru evicts keys/)

    await redis!.client.config('SET', 'maxmemory-policy', 'noeviction')
    expect((await readyz(gateway!)).body.store).toEqual({ ok: true, kind: 'redis' })
    const from = gateway!.lines.length
    await redis!.client.config('SET', 'maxmemory-policy', 'volatile-ttl')
    expect(((await readyz(gateway!)).body.store as Json).warning).toMatch(/maxmemory-policy volatile-ttl evicts keys/)
    const changed = JSON.parse(await loggedLine(gateway!, 'Redis evicts keys', { from })) as Json
    expect(changed.maxmemoryPolicy).toBe('volatile-ttl')
  })
})
