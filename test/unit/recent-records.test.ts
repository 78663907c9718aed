import { describe, expect, it } from 'vitest'
import { deepFreeze, RecentRecords } from '../../src/store/recent-records.ts'

describe('RecentRecords', () => {
  it('keeps the most recently used records and evicts the least recently used one', () => {
    const recent = new RecentRecords<{ n: number }>(2)
    recent.set('a', { n: 1 })
    recent.set('b', { n: 2 })
    expect(recent.get('a')).toEqual({ n: 1 })
    recent.set('c', { n: 3 })
    expect(recent.get('b')).toBeUndefined()
    expect(recent.get('a')).toEqual({ n: 1 })
    expect(recent.get('c')).toEqual({ n: 3 })
  })

  it('hands out frozen records, replaced by a write and dropped by delete and clear', () => {
    const recent = new RecentRecords<{ n: number, nested: { m: number[] } }>(4)
    const kept = recent.set('a', { n: 1, nested: { m: [1] } })
    expect(() => { kept.nested.m.push(2) }).toThrow(TypeError)
    recent.set('a', { ...kept, n: 2 })
    expect(recent.get('a')?.n).toBe(2)
    recent.delete('a')
    expect(recent.get('a')).toBeUndefined()
    recent.set('b', { n: 3, nested: { m: [] } })
    recent.clear()
    expect(recent.get('b')).toBeUndefined()
  })

  it('deepFreeze freezes objects and arrays all the way down and leaves other values alone', () => {
    const value = deepFreeze({ a: [{ b: 1 }], c: null, d: 'x' })
    expect(Object.isFrozen(value.a[0])).toBe(true)
    expect(deepFreeze(3)).toBe(3)
  })
})
