import { describe, expect, it } from 'vitest'
import { RequestStateCodec } from '../../src/protocol/modern/request-state.ts'

describe('requestState', () => {
  const codec = new RequestStateCodec('a-shared-secret-of-some-length', 60_000)

  it('names the held call for the principal it was minted for', () => {
    expect(codec.verify(codec.mint('call-1', 'alice', 1000), 'alice', 2000)).toBe('call-1')
  })

  it('is accepted by another process configured with the same secret, not by one with another', () => {
    const state = codec.mint('call-2', 'alice', 1000)
    expect(new RequestStateCodec('a-shared-secret-of-some-length', 60_000).verify(state, 'alice', 2000)).toBe('call-2')
    expect(() => new RequestStateCodec('another-secret-entirely-here', 60_000).verify(state, 'alice', 2000)).toThrow(/altered|not issued/)
  })

  it('refuses altered, foreign and expired states with GW_ERR_REQUEST_STATE_INVALID', () => {
    const state = codec.mint('call-3', 'alice', 1000)
    const payload = Buffer.from(JSON.stringify({ c: 'call-4', p: 'alice', x: 99_999_999 })).toString('base64url')
    expect(() => codec.verify(`${payload}.${state.split('.')[1]}`, 'alice', 2000)).toThrow(expect.objectContaining({ code: 'GW_ERR_REQUEST_STATE_INVALID' }))
    expect(() => codec.verify(state, 'bob', 2000)).toThrow(expect.objectContaining({ code: 'GW_ERR_REQUEST_STATE_INVALID' }))
    expect(() => codec.verify(state, 'alice', 1000 + 60_001)).toThrow(/expired/)
    expect(() => codec.verify('garbage', 'alice', 2000)).toThrow(expect.objectContaining({ code: 'GW_ERR_REQUEST_STATE_INVALID', rpcCode: -32602 }))
  })
})
