import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../src/errors.ts'
import { SessionPool, type PoolLimits } from '../../src/upstream/session-pool.ts'

interface FakeSession {
  name: string
  holds: number
  lastUsedAt: number
  ended: boolean
  closed: boolean
}

const MINUTE = 60_000

/** A pool on a clock the test moves, recording the sessions it closes to make room. */
function pool (limits: Partial<PoolLimits> = {}) {
  let now = 0
  const closed: string[] = []
  const sessions = new SessionPool<FakeSession>('demo', () => ({ max: 4, perPrincipal: 4, abandonedAfter: 5 * MINUTE, ...limits }), (session) => {
    session.closed = true
    closed.push(session.name)
  }, () => now)
  /** Opens a session for `principal`, last used `ago` ms before now. */
  const open = (principal: string, name: string, options: { ago?: number, holds?: number, ended?: boolean } = {}): FakeSession => {
    const session = { name, holds: options.holds ?? 0, lastUsedAt: now - (options.ago ?? 0), ended: options.ended ?? false, closed: false }
    sessions.fill(sessions.reserve(principal), session)
    return session
  }
  return { sessions, open, closed, advance: (ms: number) => { now += ms } }
}

function refusal (fn: () => unknown): GatewayError {
  try {
    fn()
  } catch (err) {
    if (err instanceof GatewayError) return err
    throw err
  }
  throw new Error('expected a refusal')
}

describe('the session pool of an upstream', () => {
  it('counts every session from its reservation and frees it once, however often it is freed', () => {
    const { sessions, open } = pool()
    const seat = sessions.reserve('alice')
    expect(sessions.size).toBe(1)
    const session = open('bob', 'b1')
    expect([sessions.size, sessions.heldBy('alice'), sessions.heldBy('bob')]).toEqual([2, 1, 1])
    sessions.free(seat)
    sessions.free(session)
    sessions.free(session)
    expect([sessions.size, sessions.heldBy('alice'), sessions.heldBy('bob')]).toEqual([0, 0, 0])
  })

  it('makes room with the idlest session of the principal holding the most, not the idlest of all', () => {
    const { sessions, open, closed, advance } = pool()
    open('bob', 'bob-1')
    advance(1000)
    open('alice', 'alice-1')
    advance(1000)
    open('alice', 'alice-2')
    open('alice', 'alice-3')
    advance(1000)
    sessions.reserve('carol')
    expect(closed).toEqual(['alice-1'])
    expect(sessions.heldBy('alice')).toBe(2)
  })

  it('makes room with an abandoned session first, then with the sessions of clients that are gone before any', () => {
    const { sessions, open, closed, advance } = pool()
    open('bob', 'bob-abandoned')
    advance(6 * MINUTE)
    open('alice', 'alice-1')
    open('alice', 'alice-2')
    open('dave', 'dave-gone', { ended: true })
    sessions.reserve('carol')
    sessions.reserve('carol')
    expect(closed).toEqual(['dave-gone', 'bob-abandoned'])
  })

  it('never closes a session something holds: with all in use, the next one is refused and the refusal names maxSessions', () => {
    const { sessions, open, closed } = pool({ max: 2, perPrincipal: 1 })
    open('alice', 'alice-1', { holds: 1, ago: 10 * MINUTE })
    open('bob', 'bob-1', { holds: 2 })
    const err = refusal(() => sessions.reserve('carol'))
    expect(err.code).toBe('GW_ERR_UPSTREAM_SESSION_LIMIT')
    expect(err.message).toContain("upstream 'demo' already has 2 sessions open, all in use (upstreams[].maxSessions)")
    expect(err.data).toEqual({ code: 'GW_ERR_UPSTREAM_SESSION_LIMIT', upstream: 'demo', limit: 'maxSessions', max: 2, held: 0 })
    expect(closed).toEqual([])
    expect(sessions.size).toBe(2)
  })

  it('gives a principal at its share its own idlest session back, and refuses it when all of its sessions are in use', () => {
    const { sessions, open, closed } = pool({ max: 8, perPrincipal: 2 })
    open('bob', 'bob-1', { ago: 10 * MINUTE })
    open('alice', 'alice-1', { ago: 2000 })
    open('alice', 'alice-2', { ago: 1000 })
    open('alice', 'alice-3', { holds: 1 })
    // alice's own idlest goes, although bob's session is idler (and abandoned).
    expect(closed).toEqual(['alice-1'])
    open('alice', 'alice-4', { holds: 1 })
    expect(closed).toEqual(['alice-1', 'alice-2'])
    const err = refusal(() => sessions.reserve('alice'))
    expect(err.code).toBe('GW_ERR_UPSTREAM_SESSION_SHARE')
    expect(err.message).toContain('(upstreams[].maxSessionsPerPrincipal)')
    expect(err.data).toMatchObject({ limit: 'maxSessionsPerPrincipal', max: 2, held: 2 })
    // Others are not affected.
    expect(() => sessions.reserve('carol')).not.toThrow()
    expect(closed).toEqual(['alice-1', 'alice-2'])
  })

  it('counts a session taken up by another principal against that one, within its share', () => {
    const { sessions, open, closed } = pool({ max: 8, perPrincipal: 1 })
    const shared = open('alice', 'per-call')
    open('bob', 'bob-1', { holds: 1 })
    expect(() => sessions.transfer(shared, 'bob')).toThrow(GatewayError)
    expect(sessions.heldBy('alice')).toBe(1)
    sessions.transfer(shared, 'carol')
    expect([sessions.heldBy('alice'), sessions.heldBy('carol'), sessions.size]).toEqual([0, 1, 2])
    expect(closed).toEqual([])
  })

  it('takes a share as large as the pool for no share: the refusal names maxSessions', () => {
    const { sessions, open } = pool({ max: 2, perPrincipal: 5 })
    open('alice', 'alice-1', { holds: 1 })
    open('alice', 'alice-2', { holds: 1 })
    expect(refusal(() => sessions.reserve('alice')).code).toBe('GW_ERR_UPSTREAM_SESSION_LIMIT')
  })
})
