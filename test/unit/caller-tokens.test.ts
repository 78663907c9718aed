// The callers' own access tokens kept for a token exchange: the latest per principal, until its exp, bounded, and
// never shown when a subject or the registry is logged or serialised.
import { inspect } from 'node:util'
import { describe, expect, it } from 'vitest'
import { CallerSubject, CallerTokens } from '../../src/auth/caller-tokens.ts'
import { sessionCredentials } from '../../src/upstream/credentials/create-credentials.ts'
import type { UpstreamCredentials } from '../../src/upstream/credentials/upstream-credentials.ts'

describe('CallerTokens', () => {
  it('gives the latest token of a principal until its exp, then none', () => {
    let now = 1000
    const tokens = new CallerTokens(10, () => now)
    tokens.note('oauth:alice', 'token-a1', 5000)
    tokens.note('oauth:alice', 'token-a2', 9000)
    expect(tokens.tokenOf('oauth:alice')).toBe('token-a2')
    expect(tokens.tokenOf('oauth:bob')).toBeUndefined()
    now = 9000
    expect(tokens.tokenOf('oauth:alice')).toBeUndefined()
    expect(tokens.size).toBe(0)
  })

  it('keeps at most its bound, the least recently authenticated going first', () => {
    const tokens = new CallerTokens(2, () => 0)
    tokens.note('a', 'ta', 10)
    tokens.note('b', 'tb', 10)
    tokens.note('a', 'ta2', 10)
    tokens.note('c', 'tc', 10)
    expect([tokens.tokenOf('a'), tokens.tokenOf('b'), tokens.tokenOf('c')]).toEqual(['ta2', undefined, 'tc'])
  })

  it('reads a session\'s subject token per request, and never shows it when logged', () => {
    const tokens = new CallerTokens(10, () => 0)
    const credentials = { sharing: 'principal' } as unknown as UpstreamCredentials
    const session = sessionCredentials(credentials, 'oauth:alice', tokens)!
    expect(session.subject.subjectToken).toBeUndefined()
    tokens.note('oauth:alice', 'secret-token-1', 10)
    expect(session.subject.subjectToken).toBe('secret-token-1')
    tokens.note('oauth:alice', 'secret-token-2', 10)
    expect(session.subject.subjectToken).toBe('secret-token-2')
    expect(session.subject).toBeInstanceOf(CallerSubject)
    const shown = `${JSON.stringify(session.subject)} ${inspect(session.subject)} ${JSON.stringify({ tokens })} ${inspect(tokens)}`
    expect(shown).toContain('oauth:alice')
    expect(shown).not.toContain('secret-token')
    // Without a principal, or with nothing to exchange, the subject is the principal alone.
    expect(sessionCredentials(credentials, undefined, tokens)!.subject).toEqual({ principal: undefined })
    expect(sessionCredentials(undefined, 'oauth:alice', tokens)).toBeUndefined()
  })
})
