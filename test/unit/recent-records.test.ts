import { describe, expect, it } from 'vitest'
import { deepFreeze, RecentRecords } from '../../src/store/recent-records.ts'

const MIB = 1024 * 1024

describe('RecentRecords', () => {
  it('keeps the most recently used records and evicts the least recently used one', () => {
    const recent = new RecentRecords<{ n: number }>(2, MIB)
    recent.set('a', { n: 1 }, 10)
    recent.set('b', { n: 2 }, 10)
    expect(recent.get('a')).toEqual({ n: 1 })
    recent.set('c', { n: 3 }, 10)
    expect(recent.get('b')).toBeUndefined()
    expect(recent.get('a')).toEqual({ n: 1 })
    expect(recent.get('c')).toEqual({ n: 3 })
  })

  it('keeps at most its byte budget of record text, and never a record over a quarter of it', () => {
    const recent = new RecentRecords<{ n: number }>(1000, 4 * MIB)
    for (let n = 0; n < 10; n++) recent.set(`r${n}`, { n }, 600 * 1024)
    // 600 KiB of text (and the overhead of each) per record: six fit in 4 MiB, the four oldest went first.
    expect(recent.size.records).toBe(6)
    expect(recent.size.bytes).toBeLessThanOrEqual(4 * MIB)
    expect(recent.get('r3')).toBeUndefined()
    expect(recent.get('r4')).toEqual({ n: 4 })
    const huge = recent.set('huge', { n: -1 }, 2 * MIB)
    expect(Object.isFrozen(huge)).toBe(true)
    expect(recent.get('huge')).toBeUndefined()
    expect(recent.size.records).toBe(6)
  })

  it('hands out frozen records, replaced by a write or an update and dropped by delete and clear', () => {
    const recent = new RecentRecords<{ n: number, nested: { m: number[] } }>(4, MIB)
    const kept = recent.set('a', { n: 1, nested: { m: [1] } }, 10)
    expect(() => { kept.nested.m.push(2) }).toThrow(TypeError)
    recent.set('a', { ...kept, n: 2 }, 10)
    expect(recent.get('a')?.n).toBe(2)
    recent.update('a', (record) => ({ ...record, n: 5 }))
    expect(recent.get('a')?.n).toBe(5)
    expect(Object.isFrozen(recent.get('a'))).toBe(true)
    recent.update('missing', (record) => record)
    expect(recent.get('missing')).toBeUndefined()
    recent.delete('a')
    expect(recent.get('a')).toBeUndefined()
    expect(recent.size).toEqual({ records: 0, bytes: 0 })
    recent.set('b', { n: 3, nested: { m: [] } }, 10)
    recent.clear()
    expect(recent.get('b')).toBeUndefined()
    expect(recent.size).toEqual({ records: 0, bytes: 0 })
  })

  it('deepFreeze freezes objects and arrays all the way down and leaves other values alone', () => {
    const value = deepFreeze({ a: [{ b: 1 }], c: null, d: 'x' })
    expect(Object.isFrozen(value.a[0])).toBe(true)
    expect(deepFreeze(3)).toBe(3)
  })
})
