// OAuth to an MCP upstream for each caller: the caller's own access token exchanged (RFC 8693) at a real
// authorization server (oidc-provider) for a token whose audience is the upstream, a real SDK server that
// verifies it. The tests ask the credentials for headers, as the HTTP transport will, and call the upstream.
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { GatewayError } from '../../src/errors.ts'
import { OAuthTokenExchange } from '../../src/upstream/credentials/oauth/token-exchange-grant.ts'
import { CLIENTS, OAuthServer } from '../helpers/oauth-server.ts'
import { OAuthUpstream, whoami } from '../helpers/oauth-upstream.ts'

async function failureOf (promise: Promise<unknown>): Promise<GatewayError> {
  const err = await promise.then(() => undefined, (e: unknown) => e)
  expect(err).toBeInstanceOf(GatewayError)
  return err as GatewayError
}

/** What the gateway's logger would write for `err`: pino with its standard error serializer (cause included). */
function logged (err: unknown): string {
  const lines: string[] = []
  const logger = pino({ level: 'debug' }, new Writable({ write (chunk, _enc, done) { lines.push(String(chunk)); done() } }))
  logger.error({ err }, 'upstream credentials failed')
  logger.flush()
  return lines.join('')
}

describe('OAuth token exchange to an upstream, per principal', () => {
  const as = new OAuthServer()
  let upstream: OAuthUpstream
  const principals = Array.from({ length: 10 }, (_, i) => `user-${i}`)
  const tokens = new Map<string, string>()

  const exchange = async (): Promise<OAuthTokenExchange> => await OAuthTokenExchange.create({
    upstream: 'remote',
    url: upstream.url,
    clientId: CLIENTS.basic,
    clientAuth: { method: 'client_secret_basic', secretEnv: 'UPSTREAM_SECRET' },
    env: { UPSTREAM_SECRET: as.secret },
  })
  const subject = (principal: string): { principal: string, subjectToken: string } => ({ principal, subjectToken: tokens.get(principal)! })

  beforeAll(async () => {
    await as.start()
    upstream = new OAuthUpstream({ issuer: as.issuer, jwksUri: as.jwksUri, metadataAt: 'hidden' })
    await upstream.start()
    as.resources.push(upstream.url)
    for (const principal of [...principals, 'alice', 'bob', 'mallory']) tokens.set(principal, await as.callerToken(principal))
  })

  afterAll(async () => {
    await upstream?.stop()
    await as.stop()
  })

  it('gives two principals two tokens, each for the upstream and speaking for its caller', async () => {
    const creds = await exchange()
    expect(creds.sharing).toBe('principal')
    const alice = await creds.headersFor(subject('alice'))
    const bob = await creds.headersFor(subject('bob'))
    expect(alice.headers.authorization).not.toBe(bob.headers.authorization)
    // Never the caller's own token: one made for the upstream.
    expect(alice.headers.authorization).not.toContain(tokens.get('alice'))
    expect(await whoami(upstream.url, alice.headers)).toBe('alice')
    expect(await whoami(upstream.url, bob.headers)).toBe('bob')
    expect(upstream.accepted.slice(-2).map((t) => t.aud)).toEqual([upstream.url, upstream.url])
    // The caller's own token, sent as it is, is refused by the upstream (its audience is the gateway).
    const passthrough = await fetch(upstream.url, { method: 'POST', headers: { authorization: `Bearer ${tokens.get('alice')!}`, 'content-type': 'application/json' }, body: '{}' })
    expect(passthrough.status).toBe(401)
    expect(as.grants.filter((g) => g.endsWith('token-exchange'))).toHaveLength(2)
    await creds.close()
  })

  it('makes one exchange per principal for 1,000 calls by 10 principals', async () => {
    const creds = await exchange()
    const before = as.tokenRequests
    const calls = principals.flatMap((principal) => Array.from({ length: 100 }, () => principal))
    const headers = await Promise.all(calls.map(async (principal) => await creds.headersFor(subject(principal))))
    const made = as.tokenRequests - before
    process.stdout.write(`token requests for 1,000 headersFor calls by 10 principals: ${made}\n`)
    expect(made).toBe(10)
    expect(new Set(headers.map((h) => h.headers.authorization)).size).toBe(10)
    expect(await whoami(upstream.url, headers[999]!.headers)).toBe('user-9')
    await creds.close()
  })

  it('tells a caller whose exchange is refused why, naming the upstream, with 403', async () => {
    as.refusedSubjects.add('mallory')
    const creds = await exchange()
    const err = await failureOf(creds.headersFor(subject('mallory')))
    expect(err.code).toBe('GW_ERR_UPSTREAM_TOKEN_REFUSED')
    expect(err.statusCode).toBe(403)
    expect(err.rpcCode).toBe(-32064)
    expect(err.message).toContain("upstream 'remote'")
    expect(err.message).toContain('invalid_grant')
    // Another principal is not held back by mallory's refusal.
    expect(await whoami(upstream.url, (await creds.headersFor(subject('alice'))).headers)).toBe('alice')
    await creds.close()
  })

  it('refuses work without its caller\'s token when no refresh token was ever given, clearly', async () => {
    const creds = await exchange()
    await creds.headersFor(subject('alice'))
    const err = await failureOf(creds.headersFor({ principal: 'alice', subjectToken: undefined }))
    expect(err.code).toBe('GW_ERR_UPSTREAM_SUBJECT_TOKEN_MISSING')
    expect(err.message).toContain("upstream 'remote'")
    expect(creds.exportGrant('alice')).toBeUndefined()
    await creds.close()
  })

  it('serves work resumed without its caller from the refresh token of the last exchange, here or on another process', async () => {
    as.issueRefreshTokens = true
    try {
      const creds = await exchange()
      await creds.headersFor(subject('alice'))
      const resumed = await creds.headersFor({ principal: 'alice', subjectToken: undefined })
      expect(await whoami(upstream.url, resumed.headers)).toBe('alice')
      expect(as.grants.at(-1)).toBe('refresh_token')

      // Another process takes over alice's task: it gets what renews her token (the caller stores it encrypted).
      const grant = creds.exportGrant('alice')!
      expect(grant.upstream).toBe('remote')
      expect(creds.exportGrant('bob')).toBeUndefined()
      const other = await exchange()
      other.importGrant('alice', grant)
      expect(await whoami(upstream.url, (await other.headersFor({ principal: 'alice', subjectToken: undefined })).headers)).toBe('alice')
      // Bob's work gets nothing from alice's grant.
      expect((await failureOf(other.headersFor({ principal: 'bob', subjectToken: undefined }))).code).toBe('GW_ERR_UPSTREAM_SUBJECT_TOKEN_MISSING')
      await Promise.all([creds.close(), other.close()])
    } finally {
      as.issueRefreshTokens = false
    }
  })

  it('never lets a token or secret into an error, its cause or a log line', async () => {
    const secrets = [as.secret, tokens.get('mallory')!, tokens.get('alice')!]
    const failures: unknown[] = []
    // A refused exchange, a wrong client secret, a server that answers 503 and one that is gone.
    const creds = await exchange()
    failures.push(await failureOf(creds.headersFor(subject('mallory'))))
    const wrong = await OAuthTokenExchange.create({
      upstream: 'remote',
      url: upstream.url,
      clientId: CLIENTS.post,
      clientAuth: { method: 'client_secret_post', secretEnv: 'S' },
      env: { S: 'not-the-secret-but-still-secret' },
    })
    secrets.push('not-the-secret-but-still-secret')
    failures.push(await failureOf(wrong.headersFor(subject('alice'))))
    as.failing = true
    const down = await exchange()
    try {
      failures.push(await failureOf(down.headersFor(subject('bob'))))
    } finally {
      as.failing = false
    }
    const issued = (await creds.headersFor(subject('alice'))).headers.authorization!.slice('Bearer '.length)
    secrets.push(issued)
    expect(creds.rejected(subject('alice'), { headers: { authorization: `Bearer ${issued}` } }, 'Bearer error="invalid_token"')).toBe(true)

    const codes = failures.map((f) => (f as GatewayError).code)
    expect(codes).toEqual(['GW_ERR_UPSTREAM_TOKEN_REFUSED', 'GW_ERR_UPSTREAM_TOKEN_REFUSED', 'GW_ERR_UPSTREAM_AUTH_SERVER_UNAVAILABLE'])
    for (const failure of failures) {
      const text = [logged(failure), JSON.stringify(failure), String((failure as Error).message), String((failure as Error).cause)].join('\n')
      for (const secret of secrets) expect(text).not.toContain(secret)
    }
    await Promise.all([creds.close(), wrong.close(), down.close()])
  })
})
