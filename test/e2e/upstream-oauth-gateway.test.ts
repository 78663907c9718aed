// upstreams[].credentials kind oauth through a real gateway process (dist/, a YAML file) in front of a real SDK
// server that takes only tokens made for it (it checks each token's audience), with a real authorization server
// (oidc-provider): client credentials (one token for 1,000 calls), token exchange (one exchange per principal for
// 1,000 calls by 10 principals; each reaches the upstream as itself), an exchange refused (the caller is told why,
// naming the upstream, never the upstream's raw 401), the authorization server down (one request, not one per
// call), a revoked client secret; and no token, caller's or upstream's, in the gateway's log.
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { textOf } from '../helpers/clients.ts'
import { ModernRaw, type ModernReply } from '../helpers/modern-raw.ts'
import { CALLER_ISSUER, CLIENTS, GATEWAY_RESOURCE, OAuthServer } from '../helpers/oauth-server.ts'
import { OAuthUpstream } from '../helpers/oauth-upstream.ts'
import { startGatewayProcess, stopAll, writeConfig, type GatewayProcess } from '../helpers/process.ts'

type Json = Record<string, unknown>

const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange'

/** Runs `count` calls of `call`, `parallel` at a time; their replies in order. */
async function inBatches<T> (count: number, parallel: number, call: (i: number) => Promise<T>): Promise<T[]> {
  const replies: T[] = []
  for (let start = 0; start < count; start += parallel) {
    replies.push(...await Promise.all(Array.from({ length: Math.min(parallel, count - start) }, async (_, j) => await call(start + j))))
  }
  return replies
}

describe('OAuth upstream credentials through a gateway process', () => {
  const as = new OAuthServer()
  let upstream: OAuthUpstream
  let dir: string
  let gateway: GatewayProcess
  const callerTokens = new Map<string, string>()
  const principals = Array.from({ length: 10 }, (_, i) => `user-${i}`)

  const caller = async (sub: string): Promise<ModernRaw> => {
    let token = callerTokens.get(sub)
    if (token === undefined) {
      token = await as.callerToken(sub)
      callerTokens.set(sub, token)
    }
    return new ModernRaw(gateway.url, {}, { authorization: `Bearer ${token}` })
  }
  const call = async (client: ModernRaw, tool: string): Promise<ModernReply> => await client.request('tools/call', { name: tool, arguments: {} })
  const grantsOf = (client: string, grant: string): number => as.clientGrants.filter((g) => g.client === client && g.grant === grant).length

  beforeAll(async () => {
    await as.start()
    upstream = new OAuthUpstream({ issuer: as.issuer, jwksUri: as.jwksUri, metadataAt: 'hidden' })
    await upstream.start()
    as.resources.push(upstream.url)
    dir = await mkdtemp(join(tmpdir(), 'gw-oauth-upstream-'))
    const secretFile = join(dir, 'client-secret')
    await writeFile(secretFile, `${as.secret}\n`)
    await chmod(secretFile, 0o600)
    const file = writeConfig(`
store: { kind: memory }
auth:
  oauth:
    issuer: ${JSON.stringify(CALLER_ISSUER)}
    jwksUri: ${JSON.stringify(as.callerJwksUri)}
    resource: ${JSON.stringify(GATEWAY_RESOURCE)}
upstreams:
  - name: service
    transport: streamable-http
    url: ${JSON.stringify(upstream.url)}
    credentials:
      kind: oauth
      grant: client_credentials
      clientId: ${CLIENTS.basic}
      clientSecretFile: ${JSON.stringify(secretFile)}
  - name: personal
    transport: streamable-http
    url: ${JSON.stringify(upstream.url)}
    credentials:
      kind: oauth
      grant: token_exchange
      clientId: ${CLIENTS.post}
      clientAuth: client_secret_post
      clientSecretFile: ${JSON.stringify(secretFile)}
      # A failed token request is not repeated for a minute: the calls in that time are told at once.
      retryBackoff: 1m
      maxRetryBackoff: 5m
`)
    gateway = await startGatewayProcess(file)
  }, 90_000)

  afterAll(async () => {
    if (gateway !== undefined) await stopAll([gateway])
    await upstream?.stop()
    await as.stop()
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  })

  it('client credentials: 1,000 calls reach the upstream with one token made for it', async () => {
    const before = grantsOf(CLIENTS.basic, 'client_credentials')
    const client = await caller('someone')
    const accepted = upstream.accepted.length
    const replies = await inBatches(1000, 25, async () => await call(client, 'service__whoami'))
    expect(replies.map((r) => textOf(r.body.result))).toEqual(Array.from({ length: 1000 }, () => CLIENTS.basic))
    const made = grantsOf(CLIENTS.basic, 'client_credentials')
    process.stdout.write(`client credentials: token requests for 1,000 calls: ${made - before} (${made} since the gateway started, its own session's included)\n`)
    // The gateway's own session asked for the token at start; the calls use it.
    expect(made).toBe(1)
    const seen = upstream.accepted.slice(accepted)
    expect(seen.every((t) => t.aud === upstream.url)).toBe(true)
    expect(seen.filter((t) => t.sub === CLIENTS.basic).length).toBeGreaterThanOrEqual(1000)
  })

  it('token exchange: 1,000 calls by 10 principals make about 10 exchanges, and each reaches the upstream as itself', async () => {
    const before = grantsOf(CLIENTS.post, EXCHANGE)
    const clients = await Promise.all(principals.map(async (sub) => await caller(sub)))
    const replies = await inBatches(1000, 25, async (i) => await call(clients[i % 10]!, 'personal__whoami'))
    expect(replies.map((r) => textOf(r.body.result))).toEqual(Array.from({ length: 1000 }, (_, i) => principals[i % 10]))
    const made = grantsOf(CLIENTS.post, EXCHANGE) - before
    process.stdout.write(`token exchange: exchanges for 1,000 calls by 10 principals: ${made}\n`)
    expect(made).toBe(10)
    // The caller's own token never reached the upstream: every token it accepted was made for it.
    expect(upstream.accepted.every((t) => t.aud === upstream.url)).toBe(true)
  })

  it('an exchange refused gives the caller a JSON-RPC error naming the upstream and the reason, not the upstream\'s 401', async () => {
    as.refusedSubjects.add('mallory')
    const mallory = await caller('mallory')
    const refused = upstream.refused.length
    const reply = await call(mallory, 'personal__whoami')
    const error = reply.body.error as Json
    expect(error.code).toBe(-32064)
    expect(error.message).toMatch(/^the authorization server of upstream 'personal' refused a token for it: invalid_grant/)
    expect(error.data).toMatchObject({ code: 'GW_ERR_UPSTREAM_TOKEN_REFUSED', upstream: 'personal' })
    process.stdout.write(`exchange refused: HTTP ${reply.status}, JSON-RPC ${String(error.code)}\n`)
    expect(upstream.refused.length).toBe(refused)
    // Mallory may still use what does not need her own token.
    expect(textOf((await call(mallory, 'service__whoami')).body.result)).toBe(CLIENTS.basic)
  })

  it('the authorization server down: calls are told it is unavailable, and it gets one request, not one per call', async () => {
    as.failing = true
    try {
      const offline = await caller('offline-user')
      const before = as.tokenRequests
      const replies = await inBatches(50, 10, async () => await call(offline, 'personal__whoami'))
      for (const reply of replies) {
        const error = reply.body.error as Json
        expect(error.code).toBe(-32065)
        expect(error.message).toMatch(/^the authorization server of upstream 'personal' cannot give a token now: its token endpoint answered HTTP 503; try again in \d+ s/)
      }
      process.stdout.write(`authorization server down: token requests for 50 calls: ${as.tokenRequests - before}\n`)
      expect(as.tokenRequests - before).toBe(1)
      // A principal whose token is cached is not affected.
      expect(textOf((await call(await caller('user-0'), 'personal__whoami')).body.result)).toBe('user-0')
    } finally {
      as.failing = false
    }
  })

  it('a revoked client secret: a new exchange is refused with the reason, naming the upstream, never the secret', async () => {
    const secret = as.secret
    as.rotateSecret('a-new-secret-the-gateway-was-not-given')
    const newcomer = await caller('newcomer')
    const reply = await call(newcomer, 'personal__whoami')
    const error = reply.body.error as Json
    expect(error.code).toBe(-32064)
    expect(error.message).toMatch(/^the authorization server of upstream 'personal' refused a token for it: invalid_client/)
    expect(JSON.stringify(reply.body)).not.toContain(secret)
  })

  it('writes no token and no secret to its log', () => {
    const log = gateway.lines.join('\n')
    for (const token of callerTokens.values()) expect(log).not.toContain(token)
    expect(log).not.toContain('first-client-secret')
    expect(log).not.toMatch(/eyJ[\w-]+\.[\w-]+\./)
  })
})
