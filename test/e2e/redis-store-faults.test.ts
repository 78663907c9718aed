import { fetch as undiciFetch } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { demoStdioYaml, loggedLine, startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'
import { STATE_SECRET } from '../helpers/redis.ts'
import { privateRedis, stopRedis } from '../helpers/private-redis.ts'
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
upstreams:
${demoStdioYaml()}
`))
}

/**
 * A Redis at `maxmemory` under `noeviction` refuses every write: the gateway is then not ready, says why,
 * and is ready again as soon as Redis accepts writes.
 */
describe('a Redis that refuses writes', () => {
  let redis: Awaited<ReturnType<typeof privateRedis>> | undefined
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
    // Fill Redis until it refuses even a small write (a large one also counts its own request buffer).
    let filled = 0
    for (const size of [64 * 1024, 1024, 16]) {
      for (;;) {
        try {
          await redis!.client.set(`fill:${filled}`, 'x'.repeat(size))
          filled++
        } catch (err) {
          expect((err as Error).message).toMatch(/^OOM/)
          break
        }
      }
    }
    const refused = await readyz(gateway!)
    expect(refused.status).toBe(503)
    expect(refused.body.status).toBe('unavailable')
    const store = refused.body.store as Json
    expect(store.ok).toBe(false)
    expect(store.kind).toBe('redis')
    expect(store.detail).toMatch(/Redis refuses writes: it is out of memory/)
    await loggedLine(gateway!, 'The store refuses writes')

    await redis!.client.del(...Array.from({ length: filled }, (_, i) => `fill:${i}`))
    const back = await until('/readyz answers 200 again', async () => {
      const answer = await readyz(gateway!)
      return answer.status === 200 ? answer : undefined
    })
    expect(back.body.store).toEqual({ ok: true, kind: 'redis' })
    await loggedLine(gateway!, 'The store accepts writes again')
  })
})

/** A Redis that evicts keys to make room can lose acknowledged tasks: that is logged as an error and shown in /readyz. */
describe('a Redis whose maxmemory-policy evicts keys', () => {
  let redis: Awaited<ReturnType<typeof privateRedis>> | undefined
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
