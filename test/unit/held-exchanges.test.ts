// What revocation decides, without a gateway: which grants count as narrowed, which remembered credentials
// still authenticate after a reload, and when an exchange held with an access token ends (fake clock).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { compilePermissions, FULL_ACCESS, narrowed, type Caller } from '../../src/auth/access.ts'
import { createAuthenticator, sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { HeldExchanges } from '../../src/auth/held-exchanges.ts'
import type { OAuthResource } from '../../src/auth/oauth-resource.ts'
import type { AuthConfig } from '../../src/config/schema.ts'
import type { GatewayError } from '../../src/errors.ts'

const ECHO = { scope: 'echo', upstreams: [], tools: ['demo__echo'] }
const DEMO = { scope: 'demo', upstreams: ['demo'], tools: [] }

function auth (tokens: Array<[string, string, string[]]>, permissions: AuthConfig['permissions'] = []): AuthConfig {
  const entries = tokens.map(([token, principal, scopes]) => ({ principal, sha256: sha256Hex(token), scopes }))
  return { tokens: entries, permissions } as AuthConfig
}

async function callerOf (config: AuthConfig, token: string): Promise<Caller> {
  return await createAuthenticator(config, undefined, false)!.authenticate({ authorization: `Bearer ${token}` })
}

describe('narrowed', () => {
  it('counts a grant taken away, or full access made partial; not a grant added or the same grants rebuilt', () => {
    const before = compilePermissions([ECHO, DEMO])
    const after = compilePermissions([ECHO])
    expect(narrowed(before(['echo', 'demo']), after(['echo', 'demo']))).toBe(true)
    expect(narrowed(after(['echo', 'demo']), before(['echo', 'demo']))).toBe(false)
    expect(narrowed(before(['echo']), compilePermissions([ECHO, DEMO])(['echo']))).toBe(false)
    expect(narrowed(before(['echo', 'demo']), before(['echo']))).toBe(true)
    expect(narrowed(FULL_ACCESS, after(['echo']))).toBe(true)
    expect(narrowed(before(['echo']), FULL_ACCESS)).toBe(false)
    // A rule rewritten counts as taken away, even where another rule still covers its names.
    expect(narrowed(before(['demo']), compilePermissions([{ ...DEMO, upstreams: ['demo', 'other'] }])(['demo']))).toBe(true)
  })
})

describe('Authenticator.recheck', () => {
  it('accepts a remembered token while the configuration keeps it for the same principal, with the grants in force', async () => {
    const start = auth([['t1', 'alice', ['echo', 'demo']]], [ECHO, DEMO])
    const caller = await callerOf(start, 't1')
    expect(caller.credential).toEqual({ kind: 'token', sha256: sha256Hex('t1'), scopes: ['echo', 'demo'], expiresAt: undefined })
    const recheck = (config: AuthConfig) => createAuthenticator(config, undefined, false)!.recheck(caller)

    expect(recheck(auth([['t1', 'alice', ['echo', 'demo']], ['t2', 'alice', []]], [ECHO, DEMO]))?.key).toBe('demo echo')
    expect(recheck(auth([['t2', 'alice', ['echo', 'demo']]], [ECHO, DEMO]))).toBeUndefined()
    expect(recheck(auth([['t1', 'bob', ['echo', 'demo']]], [ECHO, DEMO]))).toBeUndefined()
    const fewer = recheck(auth([['t1', 'alice', ['echo']]], [ECHO, DEMO]))!
    expect(narrowed(caller.access, fewer)).toBe(true)
  })
})

describe('Authenticator.recheck of an access token', () => {
  it('keeps it valid (its exp is watched apart) and grants its scopes under the permissions in force', () => {
    const caller: Caller = {
      principal: 'oauth:alice',
      access: compilePermissions([ECHO, DEMO])(['echo', 'demo']),
      authorization: undefined,
      credential: { kind: 'oauth', sha256: 'a'.repeat(64), scopes: ['echo', 'demo'], expiresAt: Date.now() + 60_000 },
    }
    // Only whether OAuth is configured matters to a recheck: its settings cannot change without a restart.
    const oauth = {} as OAuthResource
    const same = createAuthenticator(auth([], [ECHO, DEMO]), oauth, false)!.recheck(caller)!
    expect(narrowed(caller.access, same)).toBe(false)
    const fewer = createAuthenticator(auth([], [ECHO]), oauth, false)!.recheck(caller)!
    expect(narrowed(caller.access, fewer)).toBe(true)
    expect(createAuthenticator(auth([['t1', 'alice', []]], [ECHO]), undefined, false)!.recheck(caller)).toBeUndefined()
  })
})

describe('HeldExchanges', () => {
  beforeEach(() => { vi.useFakeTimers({ now: 1_000_000 }) })
  afterEach(() => { vi.useRealTimers() })

  const oauthCaller = (expiresAt: number): Caller => ({
    principal: 'oauth:alice',
    access: FULL_ACCESS,
    authorization: undefined,
    credential: { kind: 'oauth', sha256: 'f'.repeat(64), scopes: [], expiresAt },
  })

  it('ends an exchange held with an access token when its exp passes, not before, and not once released', () => {
    const held = new HeldExchanges()
    const ended: string[] = []
    held.hold(oauthCaller(1_005_000), (err) => ended.push(`first: ${err.code}`))
    const release = held.hold(oauthCaller(1_005_000), (err) => ended.push(`released: ${err.code}`))
    release()
    expect(held.size).toBe(1)
    vi.advanceTimersByTime(4_999)
    expect(ended).toEqual([])
    vi.advanceTimersByTime(1)
    expect(ended).toEqual(['first: GW_ERR_AUTH_EXPIRED'])
    expect(held.size).toBe(0)
  })

  it('waits for an exp beyond the longest timer in steps', () => {
    const held = new HeldExchanges()
    const ended: string[] = []
    const far = 1_000_000 + 30 * 24 * 3600_000
    held.hold(oauthCaller(far), (err) => ended.push(err.code))
    vi.advanceTimersByTime(far - 1_000_000 - 1)
    expect(ended).toEqual([])
    vi.advanceTimersByTime(1)
    expect(ended).toEqual(['GW_ERR_AUTH_EXPIRED'])
  })

  it('ends, on revoke, the exchanges whose credential no longer authenticates or was narrowed, and keeps the others', async () => {
    const config = auth([['t1', 'alice', ['echo', 'demo']], ['t2', 'alice', ['echo']], ['t3', 'bob', ['echo']]], [ECHO, DEMO])
    const held = new HeldExchanges()
    const ended = new Map<string, GatewayError>()
    for (const token of ['t1', 't2', 't3']) held.hold(await callerOf(config, token), (err) => ended.set(token, err))
    // Without auth nothing is held.
    held.hold({ principal: undefined, access: FULL_ACCESS, authorization: undefined }, () => ended.set('anonymous', undefined as never))
    expect(held.size).toBe(3)

    // t1 loses demo, t2 is removed, t3 gains demo.
    const next = createAuthenticator(auth([['t1', 'alice', ['echo']], ['t3', 'bob', ['echo', 'demo']]], [ECHO, DEMO]), undefined, false)!
    expect(held.revoke((caller) => next.recheck(caller))).toBe(2)
    expect([...ended.keys()].sort()).toEqual(['t1', 't2'])
    expect(ended.get('t1')?.message).toBe('Unauthorized: the credential this exchange was opened with was revoked: a configuration reload narrowed what it may use; authenticate again')
    expect(ended.get('t2')?.message).toBe('Unauthorized: the credential this exchange was opened with was revoked: a configuration reload removed or rotated it; authenticate again')
    expect(held.size).toBe(1)
  })

  it('ends at once an exchange that became long-lived after a reload revoked the credential its request came with', async () => {
    const config = auth([['t1', 'alice', ['echo']], ['t2', 'alice', ['echo']]], [ECHO])
    const before = await callerOf(config, 't1')
    const held = new HeldExchanges()
    const next = createAuthenticator(auth([['t2', 'alice', ['echo']]], [ECHO]), undefined, false)!
    expect(held.revoke((caller) => next.recheck(caller))).toBe(0)
    const ended: string[] = []
    held.hold(before, (err) => ended.push(err.code))
    expect(ended).toEqual(['GW_ERR_AUTH_REVOKED'])
    held.hold(await callerOf(config, 't2'), (err) => ended.push(`t2: ${err.code}`))
    expect(ended).toEqual(['GW_ERR_AUTH_REVOKED'])
    expect(held.size).toBe(1)
  })
})
