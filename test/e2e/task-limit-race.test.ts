import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { purge, REDIS_URL, STATE_SECRET } from '../helpers/redis.ts'

type Json = Record<string, unknown>
const TOKEN = 'limit-race-token-0123456789'
const LIMIT = 25

/** tasks.maxActivePerPrincipal under concurrent task calls of one principal on two gateway processes sharing Redis. */
describe('the active-task limit under concurrency', () => {
  const prefix = `mcpgw-limit:${randomUUID()}:`
  let gateways: RunningGateway[] = []

  beforeAll(async () => {
    const config = {
      store: { kind: 'redis', url: REDIS_URL, prefix },
      upstreams: [demoStdio()],
      auth: { tokens: [{ principal: 'racer', sha256: sha256Hex(TOKEN) }] },
      tasks: { maxActivePerPrincipal: LIMIT },
      server: { shutdownGrace: '100ms', stateSecret: STATE_SECRET },
    }
    gateways = await Promise.all([startGateway(config), startGateway(config)])
  })

  afterAll(async () => {
    await Promise.all(gateways.map((gw) => gw.close()))
    await purge(prefix)
  })

  it('accepts exactly maxActivePerPrincipal of 120 concurrent task calls spread over two processes', async () => {
    const sessions = await Promise.all(gateways.map((gw) => RawSession.open(gw.url, {}, { authorization: `Bearer ${TOKEN}` })))
    const responses = await Promise.all(Array.from({ length: 120 }, (_, i) =>
      sessions[i % 2]!.request('tools/call', { name: 'demo__slow', arguments: { duration: 60_000, steps: 1 }, task: { ttl: 120_000 } })))
    const accepted = responses.filter((r) => ((r.result as Json | undefined)?.task as Json | undefined)?.taskId !== undefined)
    const refused = responses.filter((r) => (r.error as Json | undefined)?.code === -32054)
    expect({ accepted: accepted.length, refused: refused.length }).toEqual({ accepted: LIMIT, refused: 120 - LIMIT })
  })
})
