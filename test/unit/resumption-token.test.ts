import { describe, expect, it } from 'vitest'
import { decodeResumptionToken, encodeResumptionToken } from '../../src/upstream/resumption-token.ts'

describe('resumption tokens', () => {
  it('name the call\'s id on the wire, of either type, and the event to replay after', () => {
    for (const position of [{ requestId: 5, eventId: 'stream-1::00000002' }, { requestId: 'gw-abc-5', eventId: '7' }]) {
      expect(decodeResumptionToken(encodeResumptionToken(position))).toEqual(position)
    }
  })

  it('a token the gateway did not make names nothing', () => {
    for (const token of ['', 'not json', '[]', '[1]', '[1, 2]', '[{}, "e"]', '{"requestId":1,"eventId":"e"}', '[1, "e", 3]']) {
      expect(decodeResumptionToken(token)).toBeUndefined()
    }
  })
})
