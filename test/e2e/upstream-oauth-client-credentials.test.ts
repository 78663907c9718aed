// OAuth to an MCP upstream with the gateway's own identity (client credentials), against a real authorization
// server (oidc-provider) and a real SDK server that takes only tokens made for it. The gateway's wiring comes
// later: the tests ask the credentials for headers, as the HTTP transport will, and call the upstream with them.
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { GatewayError } from '../../src/errors.ts'
import { OAuthClientCredentials } from '../../src/upstream/credentials/oauth/client-credentials-grant.ts'
import type { ClientAuthOptions, OAuthCredentialsOptions } from '../../src/upstream/credentials/oauth/oauth-options.ts'
import { CLIENTS, OAuthServer } from '../helpers/oauth-server.ts'
import { OAuthUpstream, whoami } from '../helpers/oauth-upstream.ts'

const TTL_S = 120
const GATEWAY = { principal: 'alice' }

async function failureOf (promise: Promise<unknown>): Promise<GatewayError> {
  const err = await promise.then(() => undefined, (e: unknown) => e)
  expect(err).toBeInstanceOf(GatewayError)
  return err as GatewayError
}

describe('OAuth client credentials to an upstream', () => {
  const as = new OAuthServer({ accessTokenTtl: TTL_S })
  let hidden: OAuthUpstream
  let wellKnown: OAuthUpstream
  let dir: string
  let clock = Date.now()
  const now = (): number => clock

  const credentials = async (url: string, extra: Partial<OAuthCredentialsOptions> = {}): Promise<OAuthClientCredentials> =>
    await OAuthClientCredentials.create({
      upstream: 'remote',
      url,
      clientId: CLIENTS.basic,
      clientAuth: { method: 'client_secret_basic', secretEnv: 'UPSTREAM_SECRET' },
      env: { UPSTREAM_SECRET: as.secret },
      now,
      ...extra,
    })

  beforeAll(async () => {
    await as.start()
    hidden = new OAuthUpstream({ issuer: as.issuer, jwksUri: as.jwksUri, metadataAt: 'hidden' })
    wellKnown = new OAuthUpstream({ issuer: as.issuer, jwksUri: as.jwksUri, metadataAt: 'well-known' })
    await hidden.start()
    await wellKnown.start()
    as.resources.push(hidden.url, wellKnown.url)
    dir = await mkdtemp(join(tmpdir(), 'oauth-credentials-'))
  })

  afterAll(async () => {
    await hidden?.stop()
    await wellKnown?.stop()
    await as.stop()
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  })

  it('finds the authorization server from the upstream\'s 401, and the upstream takes the token made for it', async () => {
    const creds = await credentials(hidden.url)
    const sent = await creds.headersFor(GATEWAY)
    expect(sent.headers.authorization).toMatch(/^Bearer ey/)
    // The metadata is at a path only the 401 names: discovery read it there.
    expect(await whoami(hidden.url, sent.headers)).toBe(CLIENTS.basic)
    expect(hidden.accepted.at(-1)).toEqual({ sub: CLIENTS.basic, aud: hidden.url })
    expect(creds.tokenRequests).toBe(1)
    expect(creds.sharing).toBe('gateway')
    await creds.close()
  })

  it('finds it at the well-known URL too, and authenticates with the secret in the body or a signed assertion', async () => {
    const secretFile = join(dir, 'secret')
    await writeFile(secretFile, `${as.secret}\n`)
    const keyFile = join(dir, 'key.jwk')
    await writeFile(keyFile, JSON.stringify(as.clientKey))
    const ways: Array<[string, ClientAuthOptions]> = [
      [CLIENTS.post, { method: 'client_secret_post', secretFile }],
      [CLIENTS.jwt, { method: 'private_key_jwt', keyFile }],
    ]
    for (const [clientId, clientAuth] of ways) {
      const creds = await credentials(wellKnown.url, { clientId, clientAuth })
      expect(await whoami(wellKnown.url, (await creds.headersFor(GATEWAY)).headers)).toBe(clientId)
      await creds.close()
    }
  })

  it('skips discovery when the operator names the issuer or the token endpoint', async () => {
    for (const extra of [{ issuer: as.issuer }, { tokenEndpoint: `${as.issuer}/token`, issuer: as.issuer }]) {
      const creds = await credentials(wellKnown.url, extra)
      expect(await whoami(wellKnown.url, (await creds.headersFor(GATEWAY)).headers)).toBe(CLIENTS.basic)
      await creds.close()
    }
  })

  it('makes one token request for 100 calls at once, and one refresh for 100 calls when it expires', async () => {
    const creds = await credentials(wellKnown.url)
    const before = as.tokenRequests
    const first = await Promise.all(Array.from({ length: 100 }, async () => await creds.headersFor(GATEWAY)))
    expect(as.tokenRequests - before).toBe(1)
    expect(new Set(first.map((h) => h.headers.authorization)).size).toBe(1)

    // Past its lifetime (less the refresh margin), 100 waiting calls share one refresh.
    clock += TTL_S * 1000
    const second = await Promise.all(Array.from({ length: 100 }, async () => await creds.headersFor(GATEWAY)))
    expect(as.tokenRequests - before).toBe(2)
    expect(new Set(second.map((h) => h.headers.authorization)).size).toBe(1)
    expect(second[0]!.headers.authorization).not.toBe(first[0]!.headers.authorization)
    expect(await whoami(wellKnown.url, second[0]!.headers)).toBe(CLIENTS.basic)
    await creds.close()
  })

  it('drops a token the upstream refuses, and the next call gets a new one', async () => {
    const creds = await credentials(wellKnown.url)
    const sent = await creds.headersFor(GATEWAY)
    const res = await fetch(wellKnown.url, { method: 'POST', headers: { ...sent.headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' })
    expect(res.status).not.toBe(401)
    // As if the upstream had revoked it.
    expect(creds.rejected(GATEWAY, sent, `Bearer resource_metadata="${wellKnown.metadataUrl}", error="invalid_token"`)).toBe(true)
    const renewed = await creds.headersFor(GATEWAY)
    expect(renewed.headers.authorization).not.toBe(sent.headers.authorization)
    expect(creds.tokenRequests).toBe(2)
    // A renewed token refused at once again is not worth another retry.
    expect(creds.rejected(GATEWAY, renewed, undefined)).toBe(false)
    await creds.close()
  })

  it('says so clearly when the client secret was revoked, and asks again only after a backoff', async () => {
    const creds = await credentials(wellKnown.url)
    await creds.headersFor(GATEWAY)
    const oldSecret = as.secret
    as.rotateSecret('second-client-secret-9876543210')
    try {
      clock += TTL_S * 1000
      const requests = as.tokenRequests
      const errors = await Promise.all(Array.from({ length: 20 }, async () => await failureOf(creds.headersFor(GATEWAY))))
      expect(as.tokenRequests - requests).toBe(1)
      const err = errors[0]!
      expect(err.code).toBe('GW_ERR_UPSTREAM_TOKEN_REFUSED')
      expect(err.statusCode).toBe(403)
      expect(err.message).toContain("upstream 'remote'")
      expect(err.message).toContain('invalid_client')
      expect(JSON.stringify({ ...err, message: err.message, cause: String(err.cause) })).not.toContain(oldSecret)
      // Within the backoff the same answer comes without asking the server.
      expect((await failureOf(creds.headersFor(GATEWAY))).code).toBe('GW_ERR_UPSTREAM_TOKEN_REFUSED')
      expect(as.tokenRequests - requests).toBe(1)
    } finally {
      as.rotateSecret(oldSecret)
    }
    await creds.close()
  })

  it('answers 503 with Retry-After while the authorization server is down, with one request per backoff step', async () => {
    const creds = await credentials(wellKnown.url, { issuer: as.issuer })
    await creds.headersFor(GATEWAY) // discovery done, token cached
    as.failing = true
    try {
      clock += TTL_S * 1000
      const requests = as.tokenRequests
      const errors = await Promise.all(Array.from({ length: 100 }, async () => await failureOf(creds.headersFor(GATEWAY))))
      expect(as.tokenRequests - requests).toBe(1)
      expect(errors.every((e) => e.code === 'GW_ERR_UPSTREAM_AUTH_SERVER_UNAVAILABLE' && e.statusCode === 503)).toBe(true)
      expect(errors[0]!.retryAfter).toBe(1)
      expect(errors[0]!.message).toContain('HTTP 503')
      // 100 more calls within the backoff: no request.
      await Promise.all(Array.from({ length: 100 }, async () => await failureOf(creds.headersFor(GATEWAY))))
      expect(as.tokenRequests - requests).toBe(1)
      // After the backoff one request, and the next backoff is twice as long.
      clock += 1000
      expect((await failureOf(creds.headersFor(GATEWAY))).retryAfter).toBe(2)
      expect(as.tokenRequests - requests).toBe(2)
    } finally {
      as.failing = false
    }
    clock += 2000
    expect(await whoami(wellKnown.url, (await creds.headersFor(GATEWAY)).headers)).toBe(CLIENTS.basic)
    await creds.close()
  })

  it('stops waiting for a server too slow to answer, with one request for 100 calls', async () => {
    const creds = await credentials(wellKnown.url, { issuer: as.issuer, timeoutMs: 500 })
    await creds.headersFor(GATEWAY)
    as.holding = true
    try {
      clock += TTL_S * 1000
      const requests = as.tokenRequests
      const errors = await Promise.all(Array.from({ length: 100 }, async () => await failureOf(creds.headersFor(GATEWAY))))
      expect(as.tokenRequests - requests).toBe(1)
      expect(errors.every((e) => e.code === 'GW_ERR_UPSTREAM_AUTH_SERVER_UNAVAILABLE')).toBe(true)
      expect(errors[0]!.message).toContain('no answer within 500 ms')
    } finally {
      as.answerHeld()
    }
    await creds.close()
  })

  it('names a server that cannot be reached, and a resource the metadata does not cover', async () => {
    const gone = new OAuthServer()
    await gone.start()
    await gone.stop()
    const unreachable = await credentials(wellKnown.url, { tokenEndpoint: `${gone.issuer}/token` })
    const err = await failureOf(unreachable.headersFor(GATEWAY))
    expect(err.code).toBe('GW_ERR_UPSTREAM_AUTH_SERVER_UNAVAILABLE')
    expect(err.message).toContain('connection refused')

    wellKnown.claimedResource = 'https://elsewhere.test/mcp'
    try {
      const elsewhere = await credentials(wellKnown.url)
      const mismatch = await failureOf(elsewhere.headersFor(GATEWAY))
      expect(mismatch.code).toBe('GW_ERR_UPSTREAM_AUTH_DISCOVERY')
      expect(mismatch.statusCode).toBe(502)
      expect(mismatch.message).toContain("'https://elsewhere.test/mcp', which does not cover")
    } finally {
      wellKnown.claimedResource = undefined
    }
  })
})
