import { describe, expect, it } from 'vitest'
import { RequestStateCodec } from '../../src/protocol/2026-07-28/request-state.ts'

describe('requestState', () => {
  const codec = new RequestStateCodec('a-shared-secret-of-some-length', 60_000)
  const call = (callId: string): { callId: string, owner: string } => ({ callId, owner: 'host/42/abc' })

  it('names the held call and the process holding it, for the principal it was minted for', () => {
    expect(codec.verify(codec.mint(call('call-1'), 'alice', 1000), 'alice', 2000)).toEqual({ callId: 'call-1', owner: 'host/42/abc' })
  })

  it('is accepted by another process configured with the same secret, not by one with another', () => {
    const state = codec.mint(call('call-2'), 'alice', 1000)
    expect(new RequestStateCodec('a-shared-secret-of-some-length', 60_000).verify(state, 'alice', 2000)).toEqual(call('call-2'))
    expect(() => new RequestStateCodec('another-secret-entirely-here', 60_000).verify(state, 'alice', 2000)).toThrow(/altered|not issued/)
  })

  it('refuses altered, foreign and expired states with GW_ERR_REQUEST_STATE_INVALID', () => {
    const state = codec.mint(call('call-3'), 'alice', 1000)
    const [, mac] = state.split('.')
    const payload = Buffer.from(JSON.stringify({ c: 'call-4', o: 'host/42/abc', p: 'alice', x: 99_999_999 })).toString('base64url')
    expect(() => codec.verify(`${payload}.${mac}`, 'alice', 2000)).toThrow(expect.objectContaining({ code: 'GW_ERR_REQUEST_STATE_INVALID' }))
    // Pointing the retry at another gateway process is an alteration like any other.
    const elsewhere = Buffer.from(JSON.stringify({ c: 'call-3', o: 'host/43/xyz', p: 'alice', x: 61_000 })).toString('base64url')
    expect(() => codec.verify(`${elsewhere}.${mac}`, 'alice', 2000)).toThrow(/altered/)
    expect(() => codec.verify(state, 'bob', 2000)).toThrow(expect.objectContaining({ code: 'GW_ERR_REQUEST_STATE_INVALID' }))
    expect(() => codec.verify(state, 'alice', 1000 + 60_001)).toThrow(/expired/)
    expect(() => codec.verify('garbage', 'alice', 2000)).toThrow(expect.objectContaining({ code: 'GW_ERR_REQUEST_STATE_INVALID', rpcCode: -32602 }))
  })
})
