// The rules of the upstream token cache and of reading an OAuth client's secret or key, on a fake clock and
// fake token requests (the real authorization server is in test/e2e/upstream-oauth-*.test.ts).
import { generateKeyPairSync } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { GatewayError } from '../../src/errors.ts'
import { resourceMetadataOf, wellKnownMetadataUrls } from '../../src/upstream/credentials/oauth/authorization-server-discovery.ts'
import { loadClientAuthentication } from '../../src/upstream/credentials/oauth/client-authentication.ts'
import { resolveTimings } from '../../src/upstream/credentials/oauth/oauth-options.ts'
import { TokenCache, type ObtainedToken } from '../../src/upstream/credentials/oauth/token-cache.ts'
import { TokenFailure } from '../../src/upstream/credentials/oauth/token-failure.ts'

let clock = 1_000_000
const timings = (extra: Record<string, number> = {}): ReturnType<typeof resolveTimings> =>
  resolveTimings({ upstream: 'u', url: 'https://u.test/mcp', clientId: 'c', clientAuth: { method: 'client_secret_post', secretEnv: 'X' }, now: () => clock, ...extra })

function token (name: string, lifetimeMs?: number): ObtainedToken {
  return { accessToken: name, expiresAt: lifetimeMs === undefined ? undefined : clock + lifetimeMs }
}

describe('upstream token cache', () => {
  it('lets one waiter give up without stopping the request the others wait on', async () => {
    const cache = new TokenCache('u', timings())
    let release!: (t: ObtainedToken) => void
    let requests = 0
    const obtain = async (): Promise<ObtainedToken> => { requests++; return await new Promise((resolve) => { release = resolve }) }
    const impatient = new AbortController()
    const first = cache.get('k', obtain, impatient.signal)
    const second = cache.get('k', obtain)
    impatient.abort(new Error('caller went away'))
    await expect(first).rejects.toThrow('caller went away')
    release(token('t1', 60_000))
    expect((await second).accessToken).toBe('t1')
    expect(requests).toBe(1)
  })

  it('renews a short-lived token at half its lifetime when the margin would be longer', async () => {
    const cache = new TokenCache('u', timings({ refreshSkewMs: 30_000 }))
    let n = 0
    const obtain = async (): Promise<ObtainedToken> => token(`t${++n}`, 20_000)
    expect((await cache.get('k', obtain)).accessToken).toBe('t1')
    clock += 9_000
    expect((await cache.get('k', obtain)).accessToken).toBe('t1')
    clock += 2_000
    expect((await cache.get('k', obtain)).accessToken).toBe('t2')
  })

  it('keeps a token without expiry until the upstream rejects it', async () => {
    const cache = new TokenCache('u', timings())
    let n = 0
    const obtain = async (): Promise<ObtainedToken> => token(`t${++n}`)
    await cache.get('k', obtain)
    clock += 86_400_000
    expect((await cache.get('k', obtain)).accessToken).toBe('t1')
    expect(cache.drop('k', 'someone-else')).toBe(true)
    expect(cache.drop('k', 't1')).toBe(true)
    // The same rejection reported by many requests gives one answer.
    expect(cache.drop('k', 't1')).toBe(true)
    expect((await cache.get('k', obtain)).accessToken).toBe('t2')
  })

  it('forgets the least recently used keys past its bound', async () => {
    const cache = new TokenCache('u', timings({ maxCachedTokens: 2 }))
    const obtain = async (): Promise<ObtainedToken> => token('t', 60_000)
    await cache.get('a', obtain)
    await cache.get('b', obtain)
    await cache.get('a', obtain)
    await cache.get('c', obtain)
    expect(cache.size).toBe(2)
    expect(cache.peek('b')).toBeUndefined()
    expect(cache.peek('a')).toBeDefined()
  })

  it('backs off after a failure but not after a missing caller token', async () => {
    const cache = new TokenCache('u', timings())
    let requests = 0
    const refused = async (): Promise<ObtainedToken> => { requests++; throw new TokenFailure('refused', 'invalid_grant') }
    const missing = async (): Promise<ObtainedToken> => { requests++; throw new TokenFailure('missing', 'no caller token') }
    await expect(cache.get('r', refused)).rejects.toMatchObject({ code: 'GW_ERR_UPSTREAM_TOKEN_REFUSED' })
    await expect(cache.get('r', refused)).rejects.toMatchObject({ code: 'GW_ERR_UPSTREAM_TOKEN_REFUSED' })
    expect(requests).toBe(1)
    await expect(cache.get('m', missing)).rejects.toMatchObject({ code: 'GW_ERR_UPSTREAM_SUBJECT_TOKEN_MISSING' })
    await expect(cache.get('m', missing)).rejects.toMatchObject({ code: 'GW_ERR_UPSTREAM_SUBJECT_TOKEN_MISSING' })
    expect(requests).toBe(3)
  })
})

describe('upstream OAuth discovery hints', () => {
  it('reads resource_metadata from a WWW-Authenticate header, and lists the well-known URLs', () => {
    expect(resourceMetadataOf('Bearer error="invalid_token", resource_metadata="https://u.test/.well-known/oauth-protected-resource/mcp"'))
      .toBe('https://u.test/.well-known/oauth-protected-resource/mcp')
    expect(resourceMetadataOf('Bearer realm="x"')).toBeUndefined()
    expect(resourceMetadataOf(undefined)).toBeUndefined()
    expect(wellKnownMetadataUrls('https://u.test/v1/mcp/')).toEqual([
      'https://u.test/.well-known/oauth-protected-resource/v1/mcp',
      'https://u.test/.well-known/oauth-protected-resource',
    ])
    expect(wellKnownMetadataUrls('https://u.test/')).toEqual(['https://u.test/.well-known/oauth-protected-resource'])
  })
})

describe('an OAuth client\'s secret or key', () => {
  let dir: string
  beforeAll(async () => { dir = await mkdtemp(join(tmpdir(), 'oauth-client-auth-')) })
  afterAll(async () => { await rm(dir, { recursive: true, force: true }) })

  const configError = async (promise: Promise<unknown>): Promise<string> => {
    const err = await promise.then(() => undefined, (e: unknown) => e)
    expect(err).toBeInstanceOf(GatewayError)
    expect((err as GatewayError).code).toBe('GW_ERR_CONFIG_INVALID')
    return (err as GatewayError).message
  }

  it('names what is wrong and where, never what it read', async () => {
    expect(await configError(loadClientAuthentication('remote', { method: 'client_secret_basic' })))
      .toContain("upstreams['remote'].credentials: client_secret_basic needs the client secret from exactly one of secretFile and secretEnv")
    expect(await configError(loadClientAuthentication('remote', { method: 'client_secret_post', secretFile: join(dir, 'absent') })))
      .toMatch(/cannot read the client secret file '.*absent': ENOENT/)
    expect(await configError(loadClientAuthentication('remote', { method: 'client_secret_post', secretEnv: 'EMPTY' }, { EMPTY: ' ' })))
      .toContain('environment variable EMPTY) is empty')
    const notAKey = join(dir, 'not-a-key.pem')
    await writeFile(notAKey, 'very-secret-but-not-a-key')
    const message = await configError(loadClientAuthentication('remote', { method: 'private_key_jwt', keyFile: notAKey }))
    expect(message).toContain('is not a PKCS#8 PEM or private JWK')
    expect(message).not.toContain('very-secret-but-not-a-key')
  })

  it('takes an EC or RSA key in PEM, with the algorithm of its type', async () => {
    for (const type of ['ec', 'rsa'] as const) {
      const { privateKey } = type === 'ec'
        ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
        : generateKeyPairSync('rsa', { modulusLength: 2048 })
      const file = join(dir, `${type}.pem`)
      await writeFile(file, privateKey.export({ type: 'pkcs8', format: 'pem' }))
      const auth = await loadClientAuthentication('remote', { method: 'private_key_jwt', keyFile: file, kid: 'k1' })
      expect(auth.secret).toBeUndefined()
    }
  })
})
