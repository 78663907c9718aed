import { describe, expect, it } from 'vitest'
import { revisionOf, rewrittenEra } from '../../src/store/stored-revision.ts'

/** The previous names of the eras, as the stores held them, read and rewritten as revisions. */
describe('stored eras named by revision', () => {
  it('reads the previous names as the revisions they meant, and a revision as itself', () => {
    expect(revisionOf('legacy')).toBe('2025-11-25')
    expect(revisionOf('modern')).toBe('2026-07-28')
    expect(revisionOf('2025-11-25')).toBe('2025-11-25')
    expect(revisionOf('2026-07-28')).toBe('2026-07-28')
  })

  it('rewrites a resume address\'s era and nothing else of its text', () => {
    const resume = '{"sessionId":"s-1","protocolVersion":"2026-07-28","era":"modern","kind":"native","upstreamTaskId":"up-1"}'
    expect(rewrittenEra(resume)).toBe(resume.replace('"era":"modern"', '"era":"2026-07-28"'))
  })

  it('rewrites a task body\'s own era, not the same pair in the client\'s arguments, and keeps numbers as written', () => {
    // Written before requests had a field of their own: the arguments sit in the body, before the era here.
    const body = '{"id":"t-1","request":{"arguments":{"era":"legacy","big":12345678901234567890}},"era":"legacy","principal":"p"}'
    const rewritten = rewrittenEra(body)!
    expect(JSON.parse(rewritten)).toMatchObject({ era: '2025-11-25', request: { arguments: { era: 'legacy' } } })
    expect(rewritten).toContain('"big":12345678901234567890')
    expect(rewritten.length).toBe(body.length + '2025-11-25'.length - 'legacy'.length)
  })

  it('leaves a body that already names its revision, or has no era, alone', () => {
    expect(rewrittenEra('{"id":"t-1","era":"2025-11-25","request":{"era":"legacy"}}')).toBeUndefined()
    expect(rewrittenEra('{"id":"t-1"}')).toBeUndefined()
  })
})
