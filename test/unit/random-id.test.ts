import { describe, expect, it } from 'vitest'
import { randomId } from '../../src/wire/random-id.ts'

describe('randomId', () => {
  it('gives base64url ids of the requested size, never the same one twice across pool refills', () => {
    const ids = Array.from({ length: 2000 }, () => randomId())
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{22}$/)
    expect(new Set(ids).size).toBe(ids.length)
    expect(Buffer.from(randomId(6), 'base64url')).toHaveLength(6)
  })

  it('refuses a size larger than its pool', () => {
    expect(() => randomId(5000)).toThrow(RangeError)
  })
})
