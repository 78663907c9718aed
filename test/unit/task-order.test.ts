import { describe, expect, it } from 'vitest'
import { byPosition, TaskOrder, type OrderEntry } from '../../src/store/memory/task-order.ts'

/** A deterministic generator (mulberry32), so that a failure can be replayed. */
function random (seed: number): () => number {
  let state = seed
  return () => {
    state = (state + 0x6d2b79f5) | 0
    let t = Math.imul(state ^ (state >>> 15), 1 | state)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** What a page must be: the naive way, every entry sorted and filtered. */
function expected (entries: readonly OrderEntry[], after: OrderEntry | undefined, limit: number, now: number): string[] {
  return [...entries].sort(byPosition)
    .filter((entry) => entry.expiresAt > now && (!after || byPosition(entry, after) > 0))
    .slice(0, limit)
    .map((entry) => entry.id)
}

describe('a principal\'s task order (memory store)', () => {
  it('pages exactly like sorting every task, through adds out of order, removals and block splits', () => {
    const next = random(7)
    const order = new TaskOrder()
    const held: OrderEntry[] = []
    for (let step = 0; step < 6000; step++) {
      if (held.length > 0 && next() < 0.3) {
        const [gone] = held.splice(Math.floor(next() * held.length), 1)
        expect(order.remove(gone!)).toBe(true)
        expect(order.remove(gone!)).toBe(false)
      } else {
        // Few distinct times, so that ties fall back to the id; most tasks arrive in order, some late.
        const createdAt = next() < 0.8 ? step : Math.floor(next() * step)
        const entry = { createdAt, id: `t${Math.floor(next() * 1e9).toString(36)}-${step}`, expiresAt: next() < 0.1 ? Infinity : createdAt + Math.floor(next() * 3000) }
        held.push(entry)
        order.add(entry)
      }
      if (step % 500 === 0 && held.length > 0) {
        const now = Math.floor(next() * step)
        const after = next() < 0.5 ? undefined : held[Math.floor(next() * held.length)]
        expect(order.page(after, 50, now)).toEqual(expected(held, after, 50, now))
        // A cursor at a position nobody holds (a task swept since) still pages from there.
        const between = { createdAt: Math.floor(next() * step), id: 'm', expiresAt: 0 }
        expect(order.page(between, 50, now)).toEqual(expected(held, between, 50, now))
      }
    }
    expect(order.size).toBe(held.length)
    const all = order.page(undefined, held.length, -Infinity)
    expect(all).toEqual(expected(held, undefined, held.length, -Infinity))
  })

  it('reads a page by looking at about a page of entries, however many tasks it holds', () => {
    const visitsFor = (stored: number): number => {
      const order = new TaskOrder()
      for (let i = 0; i < stored; i++) order.add({ createdAt: i, id: `t${i}`, expiresAt: Infinity })
      order.visited = 0
      order.page(undefined, 50, 0)
      order.page({ createdAt: stored / 2, id: `t${stored / 2}` }, 50, 0)
      return order.visited
    }
    expect(visitsFor(1000)).toBe(100)
    expect(visitsFor(100_000)).toBe(100)
  })

  it('passes over tasks past their TTL without looking at each: 50,000 expired ahead of the live ones cost a first page no more than a block of them', () => {
    const visitsFor = (expired: number): { ids: string[], visited: number } => {
      const order = new TaskOrder()
      for (let i = 0; i < expired; i++) order.add({ createdAt: i, id: `old${i}`, expiresAt: i + 10 })
      for (let i = 0; i < 100; i++) order.add({ createdAt: expired + i, id: `live${i}`, expiresAt: Infinity })
      order.visited = 0
      const ids = order.page(undefined, 10, expired + 1000)
      return { ids, visited: order.visited }
    }
    const few = visitsFor(500)
    const many = visitsFor(50_000)
    expect(many.ids).toEqual(Array.from({ length: 10 }, (_, i) => `live${i}`))
    expect(few.ids).toEqual(many.ids)
    // At most the one block where expired and live tasks meet is looked at entry by entry.
    expect(many.visited).toBeLessThanOrEqual(few.visited + 1024)
    expect(many.visited).toBeLessThan(1100)
  })
})
