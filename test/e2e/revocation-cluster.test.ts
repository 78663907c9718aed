// Revocation across gateway processes: a 2026-07-28 call held on the client's home process for a request
// another process received is ended when the home reloads without the token that started it. Each process
// ends what it holds when it reloads; the home learns the credential from the forwarded request.
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { parseConfig } from '../../src/config/load.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { purge, REDIS_URL, STATE_SECRET } from '../helpers/redis.ts'

type Json = Record<string, unknown>

const T1 = 'alice-cluster-token-one-0123456789'
const T2 = 'alice-cluster-token-two-0123456789'
const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` })
const ELICIT = { elicitation: { form: {} } }
const FORWARDED = 'serving a request another gateway process forwarded to the client\'s home'

describe('revocation on the home process of a client', () => {
  const prefix = `mcpgw-revoke:${randomUUID()}:`
  const raw = (tokens: string[]): Record<string, unknown> => ({
    store: { kind: 'redis', url: REDIS_URL, prefix },
    server: { port: 0, shutdownGrace: '100ms', stateSecret: STATE_SECRET },
    auth: { tokens: tokens.map((token) => ({ principal: 'alice', sha256: sha256Hex(token) })) },
    upstreams: [demoStdio()],
  })
  let entry: RunningGateway
  let home: RunningGateway

  beforeAll(async () => {
    [entry, home] = await Promise.all([startGateway(raw([T1, T2])), startGateway(raw([T1, T2]))])
  })

  afterAll(async () => {
    await Promise.all([entry?.close(), home?.close()])
    await purge(prefix)
  })

  it('cancels a call held on the home for a removed token when the home reloads: the retry through the other process is told why', async () => {
    // The client's first request makes `home` its home; its call, sent to `entry`, is then held there.
    expect((await new ModernRaw(home.url, ELICIT, bearer(T1)).request('tools/list')).status).toBe(200)
    const round = await new ModernRaw(entry.url, ELICIT, bearer(T1)).result('tools/call', { name: 'demo__ask_user', arguments: { message: 'PIN?' } })
    expect(round.resultType).toBe('input_required')
    expect(home.logs().some((l) => l.msg === FORWARDED)).toBe(true)
    const [key] = Object.keys(round.inputRequests as Json)

    // Only the home reloads: the process that forwarded the call has nothing of it to end.
    await home.gateway.reload(parseConfig({ ...raw([T2]), server: { port: 0, shutdownGrace: '100ms', stateSecret: STATE_SECRET } }, {}))

    const retry = await new ModernRaw(entry.url, ELICIT, bearer(T2)).request('tools/call', {
      name: 'demo__ask_user',
      arguments: { message: 'PIN?' },
      requestState: round.requestState,
      inputResponses: { [key!]: { action: 'accept', content: { name: '1234' } } },
    })
    expect(retry.body.error).toMatchObject({ code: -32001, message: expect.stringContaining('was revoked') })
  })
})
