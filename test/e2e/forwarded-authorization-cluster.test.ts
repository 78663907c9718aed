// A caller's Authorization header, kept for a `forwardAuthorization` upstream, crosses the peer channel sealed:
// a 2025-11-25 request that reaches the process which is not the client's home is forwarded there over Redis
// pub/sub, the home's upstream session still gets the caller's own header, and the forwarded request on Redis
// does not hold it in clear (every message of the test's prefix is read by a subscriber of its own).
import { randomUUID } from 'node:crypto'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { textOf } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { purge, REDIS_URL, STATE_SECRET } from '../helpers/redis.ts'
import { startStatelessUpstream } from '../helpers/stateless-upstream.ts'

const CREDENTIAL = 'Bearer alice-own-credential-for-the-echo-7f3a'
const FORWARDED = 'serving a request another gateway process forwarded to the client\'s home'

describe('forwardAuthorization across gateway processes', () => {
  const prefix = `mcpgw-fwd-auth:${randomUUID()}:`
  let echo: { url: string, close: () => Promise<void> }
  let home: RunningGateway
  let entry: RunningGateway
  const watcher = new Redis(REDIS_URL, { lazyConnect: true })
  const seen: string[] = []

  beforeAll(async () => {
    echo = await startStatelessUpstream(() => {
      const server = new McpServer({ name: 'header-echo', version: '1.0.0' })
      server.registerTool('whoami', { description: 'the Authorization header of this request' }, async (extra) => ({
        content: [{ type: 'text', text: String(extra.requestInfo?.headers.authorization ?? '(none)') }],
      }))
      return server
    })
    await watcher.connect()
    watcher.on('pmessage', (_pattern: string, _channel: string, message: string) => { seen.push(message) })
    await watcher.psubscribe(`${prefix}*`)
    const config = {
      store: { kind: 'redis', url: REDIS_URL, prefix },
      server: { port: 0, shutdownGrace: '100ms', stateSecret: STATE_SECRET },
      upstreams: [{ name: 'echo', transport: 'streamable-http', url: echo.url, era: 'legacy', forwardAuthorization: true }],
    }
    ;[home, entry] = await Promise.all([startGateway(config), startGateway(config)])
  })

  afterAll(async () => {
    await Promise.all([home?.close(), entry?.close()])
    watcher.disconnect()
    await echo?.close()
    await purge(prefix)
  })

  it('reaches the upstream with the caller\'s own header from the home, sealed on the way', async () => {
    const session = await RawSession.open(home.url, {}, { authorization: CREDENTIAL })
    // The client's first request that needs its upstream sessions makes `home` its home.
    expect((await session.request('tools/list')).result).toBeDefined()
    const reply = await session.on(entry.url).request('tools/call', { name: 'echo__whoami', arguments: {} })
    expect(textOf(reply.result)).toBe(CREDENTIAL)
    expect(home.logs().some((line) => line.msg === FORWARDED)).toBe(true)
    const forwarded = seen.filter((message) => message.includes('\\"kind\\":\\"home/request\\"'))
    expect(forwarded.length).toBeGreaterThan(0)
    expect(forwarded.some((message) => message.includes('sealedAuthorization'))).toBe(true)
    // The request never holds the header in clear (the reply does: the echo's answer is the header itself).
    expect(forwarded.some((message) => message.includes('alice-own-credential'))).toBe(false)
  })
})
