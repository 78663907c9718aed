// Work resumed without its caller keeps its upstream credentials: a token exchange (RFC 8693) at a real
// authorization server (oidc-provider) stores, sealed in the gateway's store, the refresh token that renews that
// principal's token; another process (or the next start on the same SQLite file), which never saw the caller,
// gets a fresh token from it, and a real SDK server that verifies each token's audience accepts it. The store's
// own bytes are searched for every token of the test.
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { GatewayError } from '../../src/errors.ts'
import { openGrantVault } from '../../src/store/grant-vault.ts'
import { RedisStore } from '../../src/store/redis/redis-store.ts'
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import type { GatewayStore } from '../../src/store/types.ts'
import { OAuthTokenExchange } from '../../src/upstream/credentials/oauth/token-exchange-grant.ts'
import { CLIENTS, OAuthServer } from '../helpers/oauth-server.ts'
import { OAuthUpstream, whoami } from '../helpers/oauth-upstream.ts'
import { redisValues, sqliteBytes } from '../helpers/raw-store.ts'
import { purge, REDIS_URL, STATE_SECRET } from '../helpers/redis.ts'

async function failureOf (promise: Promise<unknown>): Promise<GatewayError> {
  const err = await promise.then(() => undefined, (e: unknown) => e)
  expect(err).toBeInstanceOf(GatewayError)
  return err as GatewayError
}

const bearerOf = (headers: { headers: Readonly<Record<string, string>> }): string => headers.headers.authorization!.slice('Bearer '.length)

describe('OAuth token exchange: work resumed without its caller gets a token from the stored grant', () => {
  const as = new OAuthServer()
  let upstream: OAuthUpstream
  const dir = mkdtempSync(join(tmpdir(), 'gw-grants-e2e-'))
  const open: Array<{ close: () => Promise<void> }> = []

  /** Token exchange credentials whose grants go to `store`, sealed with `secret` (null: no server.stateSecret). */
  const exchange = async (store: GatewayStore, secret: string | null = STATE_SECRET): Promise<OAuthTokenExchange> => {
    const creds = await OAuthTokenExchange.create({
      upstream: 'remote',
      url: upstream.url,
      clientId: CLIENTS.basic,
      clientAuth: { method: 'client_secret_basic', secretEnv: 'UPSTREAM_SECRET' },
      env: { UPSTREAM_SECRET: as.secret },
      grants: openGrantVault(store, secret ?? undefined),
    })
    open.push(creds)
    return creds
  }
  const resumed = (principal: string): { principal: string, subjectToken: undefined } => ({ principal, subjectToken: undefined })

  beforeAll(async () => {
    await as.start()
    as.issueRefreshTokens = true
    upstream = new OAuthUpstream({ issuer: as.issuer, jwksUri: as.jwksUri, metadataAt: 'hidden' })
    await upstream.start()
    as.resources.push(upstream.url)
  })

  afterEach(async () => {
    for (const item of open.splice(0).reverse()) await item.close()
    as.refusedSubjects.clear()
  })

  afterAll(async () => {
    await upstream?.stop()
    await as.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('on SQLite: the next start on the same file serves the principal\'s resumed work, and the file holds no token', async () => {
    const file = join(dir, `${randomUUID()}.db`)
    const callerToken = await as.callerToken('alice')
    const first = new SqliteStore(file)
    const before = await exchange(first)
    const live = await before.headersFor({ principal: 'alice', subjectToken: callerToken })
    expect(await whoami(upstream.url, live.headers)).toBe('alice')
    const issued = before.exportGrant('alice')!.refreshToken
    await before.close()
    await first.close()

    // A process that never saw alice's request, on the same file: her task resumed without her token.
    const second = new SqliteStore(file)
    open.push(second)
    const after = await exchange(second)
    const renewed = await after.headersFor(resumed('alice'))
    expect(await whoami(upstream.url, renewed.headers)).toBe('alice')
    expect(upstream.accepted.at(-1)).toEqual({ sub: 'alice', aud: upstream.url })
    expect(as.grants.at(-1)).toBe('refresh_token')
    // The refresh rotated the grant: the one now stored is the new refresh token, sealed.
    const rotated = after.exportGrant('alice')!.refreshToken
    expect(rotated).not.toBe(issued)

    const bytes = sqliteBytes(file)
    expect(bytes).toContain((await second.grants.get('alice', 'remote', Date.now()))!.sealed)
    for (const token of [callerToken, issued, rotated, bearerOf(live), bearerOf(renewed)]) expect(bytes).not.toContain(token)
  })

  it('on Redis, two processes at once: either serves resumed work from the latest grant, and Redis holds no token', async () => {
    const prefix = `mcpgw-test:${randomUUID()}:`
    const stores = [new RedisStore({ url: REDIS_URL, prefix }), new RedisStore({ url: REDIS_URL, prefix })]
    for (const store of stores) open.push({ close: async () => { await store.close() } })
    open.push({ close: async () => { await purge(prefix) } })
    await Promise.all(stores.map(async (store) => { await store.ready() }))
    const [one, two] = [await exchange(stores[0]!), await exchange(stores[1]!)]
    const callerToken = await as.callerToken('carol')
    const live = await one.headersFor({ principal: 'carol', subjectToken: callerToken })

    const onTwo = await two.headersFor(resumed('carol'))
    expect(await whoami(upstream.url, onTwo.headers)).toBe('carol')
    // Process one still holds, in memory, the refresh token process two has used up: it reads the latest from
    // the store instead, and the authorization server (which refuses a used refresh token) gives it a token.
    expect(one.exportGrant('carol')!.refreshToken).not.toBe(two.exportGrant('carol')!.refreshToken)
    const onOne = await one.headersFor(resumed('carol'))
    expect(await whoami(upstream.url, onOne.headers)).toBe('carol')
    expect(as.grants.slice(-2)).toEqual(['refresh_token', 'refresh_token'])

    const values = await redisValues(prefix)
    expect(values).toContain((await stores[0]!.grants.get('carol', 'remote', Date.now()))!.sealed)
    const tokens = [callerToken, one.exportGrant('carol')!.refreshToken, two.exportGrant('carol')!.refreshToken, bearerOf(live), bearerOf(onTwo), bearerOf(onOne)]
    for (const token of tokens) expect(values).not.toContain(token)
  })

  it('on Redis, two processes renewing one principal at once: the one whose refresh token the other used up takes the newer grant', async () => {
    const prefix = `mcpgw-test:${randomUUID()}:`
    const stores = [new RedisStore({ url: REDIS_URL, prefix }), new RedisStore({ url: REDIS_URL, prefix })]
    for (const store of stores) open.push({ close: async () => { await store.close() } })
    open.push({ close: async () => { await purge(prefix) } })
    await Promise.all(stores.map(async (store) => { await store.ready() }))
    const [one, two] = [await exchange(stores[0]!), await exchange(stores[1]!)]
    await one.headersFor({ principal: 'erin', subjectToken: await as.callerToken('erin') })
    // Both read the same stored refresh token; the server takes it once (rotation) and refuses its second use.
    const [a, b] = await Promise.all([one.headersFor(resumed('erin')), two.headersFor(resumed('erin'))])
    expect(await whoami(upstream.url, a.headers)).toBe('erin')
    expect(await whoami(upstream.url, b.headers)).toBe('erin')
    expect(await stores[0]!.grants.get('erin', 'remote', Date.now())).not.toBeNull()
  })

  it('gives a refused grant GW_ERR_UPSTREAM_TOKEN_REFUSED, naming the upstream, and deletes it from the store', async () => {
    const file = join(dir, `${randomUUID()}.db`)
    const store = new SqliteStore(file)
    open.push(store)
    const creds = await exchange(store)
    await creds.headersFor({ principal: 'bob', subjectToken: await as.callerToken('bob') })
    expect(await store.grants.get('bob', 'remote', Date.now())).not.toBeNull()

    as.refusedSubjects.add('bob')
    const other = await exchange(store)
    const err = await failureOf(other.headersFor(resumed('bob')))
    expect(err.code).toBe('GW_ERR_UPSTREAM_TOKEN_REFUSED')
    expect(err.statusCode).toBe(403)
    expect(err.message).toContain("upstream 'remote'")
    expect(err.message).toContain('invalid_grant')
    expect(await store.grants.get('bob', 'remote', Date.now())).toBeNull()
    // With the grant gone, later resumed work is told there is none (after the refusal's backoff, on a new process).
    const later = await exchange(store)
    expect((await failureOf(later.headersFor(resumed('bob')))).code).toBe('GW_ERR_UPSTREAM_SUBJECT_TOKEN_MISSING')
  })

  it('without server.stateSecret keeps grants in memory only, says so at start, and the next start has none', async () => {
    const file = join(dir, `${randomUUID()}.db`)
    const lines: string[] = []
    const log = pino({ level: 'info' }, new Writable({ write (chunk, _enc, done) { lines.push(String(chunk)); done() } }))
    const first = new SqliteStore(file)
    const vault = openGrantVault(first, undefined, { log })
    expect(vault.persistent).toBe(false)
    expect(lines.join('')).toContain('server.stateSecret is not set')
    const before = await exchange(first, null)
    await before.headersFor({ principal: 'dave', subjectToken: await as.callerToken('dave') })
    // In this process, resumed work is still served.
    expect(await whoami(upstream.url, (await before.headersFor(resumed('dave'))).headers)).toBe('dave')
    expect(await first.grants.get('dave', 'remote', Date.now())).toBeNull()
    await before.close()
    await first.close()

    const second = new SqliteStore(file)
    open.push(second)
    const after = await exchange(second, null)
    const err = await failureOf(after.headersFor(resumed('dave')))
    expect(err.code).toBe('GW_ERR_UPSTREAM_SUBJECT_TOKEN_MISSING')
    expect(err.message).toContain("upstream 'remote'")
  })
})
