import { describe, expect, it } from 'vitest'
import { ClientSessions } from '../../src/upstream/client-sessions.ts'
import { credentialTag } from '../../src/upstream/client-ref.ts'
import { SessionPool } from '../../src/upstream/session-pool.ts'
import type { UpstreamSession } from '../../src/upstream/upstream-session.ts'

/** What ClientSessions and the pool read of a session. */
function fakeSession (key: string): UpstreamSession {
  const session = { key, holds: 0, lastUsedAt: 0, ended: false, closed: false, close: async () => { session.closed = true } }
  return session as unknown as UpstreamSession
}

function registry (): { sessions: ClientSessions, pool: SessionPool<UpstreamSession> } {
  const pool = new SessionPool<UpstreamSession>('demo', () => ({ max: 10, perPrincipal: 10, abandonedAfter: 60_000 }), () => {})
  return { sessions: new ClientSessions(pool), pool }
}

describe('the per-client sessions of an upstream', () => {
  it('marks a session ended when its client ends while it is still being opened', async () => {
    const { sessions, pool } = registry()
    let opened!: (session: UpstreamSession) => void
    const opening = sessions.obtain('session:a', 'alice', async () => await new Promise((resolve) => { opened = resolve }))
    expect(pool.size).toBe(1)
    expect(sessions.endClient('session:a')).toEqual([])
    const session = fakeSession('session:a')
    opened(session)
    expect(await opening).toBe(session)
    expect(session.ended).toBe(true)
  })

  it('finds every session of a client, one per forwarded credential, and none of another client', async () => {
    const { sessions, pool } = registry()
    const keys = [`session:a\u0000${credentialTag('Bearer one')}`, `session:a\u0000${credentialTag(undefined)}`, `session:ab\u0000${credentialTag('Bearer one')}`]
    for (const key of keys) await sessions.obtain(key, 'alice', async () => fakeSession(key.split('\u0000')[0]!))
    expect(pool.size).toBe(3)
    expect([...sessions.ofClient('session:a')]).toHaveLength(2)
    const ended = sessions.endClient('session:a')
    expect(ended.map((s) => s.ended)).toEqual([true, true])
    expect([...sessions.ofClient('session:ab')].map((s) => s.ended)).toEqual([false])
    for (const session of ended) sessions.remove(session)
    expect(pool.size).toBe(1)
  })

  it('never puts the credential itself in a key', () => {
    const tag = credentialTag('Bearer secret-token')
    expect(tag).not.toContain('secret')
    expect(tag).toBe(credentialTag('Bearer secret-token'))
    expect(tag).not.toBe(credentialTag('Bearer other-token'))
  })
})
