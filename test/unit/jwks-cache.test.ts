// The issuer's signing keys as the gateway keeps them: what an outage of the issuer's JWKS endpoint does to
// tokens, against a real JWKS endpoint and jose's own verification.
import { Writable } from 'node:stream'
import { jwtVerify } from 'jose'
import { pino } from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { JwksCache } from '../../src/auth/jwks-cache.ts'
import { JwksServer, signingKey, type SigningKey } from '../helpers/jwks-server.ts'

describe('JwksCache', () => {
  const jwks = new JwksServer()
  const lines: string[] = []
  const log = pino(new Writable({ write (chunk: Buffer, _encoding, done) { lines.push(chunk.toString('utf8')); done() } }))
  let key: SigningKey

  beforeAll(async () => {
    await jwks.listen()
    key = await signingKey('key-1')
    jwks.keys = [key]
  })

  afterAll(async () => {
    await jwks.close()
  })

  it('keeps verifying with the last good keys while the issuer fails, and answers unavailable for keys it never had', async () => {
    // maxAgeMs 0: every verification wants fresh keys; cooldown 0: every one may fetch them.
    const cache = new JwksCache({ uri: new URL(jwks.jwksUri), maxAgeMs: 0, cooldownMs: 0, timeoutMs: 5000, log })
    const token = await jwks.token(key, { sub: 'kept' })
    expect((await jwtVerify(token, cache.getKey)).payload.sub).toBe('kept')
    jwks.failing = true
    try {
      const fetches = jwks.fetches
      expect((await jwtVerify(token, cache.getKey)).payload.sub).toBe('kept')
      expect(jwks.fetches).toBe(fetches + 1)
      const stranger = await jwks.token(await signingKey('key-never-published'))
      await expect(jwtVerify(stranger, cache.getKey)).rejects.toMatchObject({ code: 'GW_ERR_AUTH_UNAVAILABLE', message: expect.stringContaining('HTTP 500') })
      const failures = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === 'could not fetch the issuer\'s signing keys')
      expect(failures.map((line) => line.keptKeys)).toEqual([true, true])
    } finally {
      jwks.failing = false
    }
    // Once the issuer answers again, its keys are fetched and a key it never published is the token's fault.
    await expect(jwtVerify(await jwks.token(await signingKey('key-still-unknown')), cache.getKey)).rejects.toMatchObject({ code: 'ERR_JWKS_NO_MATCHING_KEY' })
  })
})
