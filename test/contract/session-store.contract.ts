import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import type { GatewayStore, SessionRecord } from '../../src/store/types.ts'
import { freshStoreEachTest } from './fresh-store.ts'

function session (overrides: Partial<SessionRecord> = {}): SessionRecord {
  const id = randomUUID()
  return {
    id,
    principal: `anonymous:${id}`,
    protocolVersion: '2025-11-25',
    clientCapabilities: { elicitation: { form: {} }, sampling: {} },
    clientInfo: { name: 'contract', version: '1' },
    createdAt: 1_000,
    lastSeenAt: 1_000,
    ...overrides,
  }
}

/** The behaviour every store must show for sessions and signals; runs unchanged against each backend. */
export function sessionStoreContract (name: string, create: () => Promise<GatewayStore>): void {
  describe(`store contract (sessions, bus): ${name}`, () => {
    let store: GatewayStore
    freshStoreEachTest(create, (opened) => { store = opened })

    it('get() returns null for an unknown id', async () => {
      expect(await store.sessions.get(randomUUID())).toBeNull()
    })

    it('returns a created session with every field intact', async () => {
      const created = session()
      await store.sessions.create(created)
      expect(await store.sessions.get(created.id)).toEqual(created)
    })

    it('touch() moves lastSeenAt forward only', async () => {
      const created = session()
      await store.sessions.create(created)
      await store.sessions.touch(created.id, 5_000)
      await store.sessions.touch(created.id, 4_000)
      expect((await store.sessions.get(created.id))?.lastSeenAt).toBe(5_000)
    })

    it('delete() removes a session once', async () => {
      const created = session()
      await store.sessions.create(created)
      expect(await store.sessions.delete(created.id)).toBe(true)
      expect(await store.sessions.delete(created.id)).toBe(false)
      expect(await store.sessions.get(created.id)).toBeNull()
    })

    it('sweep() deletes exactly the sessions idle since before the cutoff', async () => {
      const old = session({ lastSeenAt: 1_000 })
      const fresh = session({ lastSeenAt: 9_000 })
      await store.sessions.create(old)
      await store.sessions.create(fresh)
      expect(await store.sessions.sweep(5_000)).toEqual([old.id])
      expect(await store.sessions.get(old.id)).toBeNull()
      expect(await store.sessions.get(fresh.id)).not.toBeNull()
    })

    it('countOf() counts a principal\'s sessions until they are deleted or swept, up to atMost', async () => {
      const principal = `alice-${randomUUID()}`
      const old = session({ principal, lastSeenAt: 1_000 })
      const kept = session({ principal, lastSeenAt: 9_000 })
      const ended = session({ principal, lastSeenAt: 9_000 })
      for (const s of [old, kept, ended, session({ lastSeenAt: 9_000 })]) await store.sessions.create(s)
      expect(await store.sessions.countOf(principal, 100)).toBe(3)
      expect(await store.sessions.countOf(principal, 2)).toBe(2)
      expect(await store.sessions.delete(ended.id)).toBe(true)
      expect(await store.sessions.delete(ended.id)).toBe(false)
      expect(await store.sessions.sweep(5_000)).toContain(old.id)
      expect(await store.sessions.countOf(principal, 100)).toBe(1)
      expect(await store.sessions.get(kept.id)).not.toBeNull()
      expect(await store.sessions.countOf(`nobody-${randomUUID()}`, 100)).toBe(0)
    })

    it('the bus delivers to current subscribers of a channel only', async () => {
      // Delivery is asynchronous: a second subscriber that stays tells when a message has been handed out.
      const seen: unknown[] = []
      const stayed: unknown[] = []
      let handed: (() => void) | undefined
      const unsubscribe = store.bus.subscribe('session:a', (message) => seen.push(message))
      const stay = store.bus.subscribe('session:a', (message) => {
        stayed.push(message)
        handed?.()
      })
      const handedOut = async (publish: () => Promise<unknown>): Promise<void> => {
        const done = new Promise<void>((resolve) => { handed = resolve })
        await publish()
        await done
      }
      await handedOut(async () => {
        await store.bus.publish('session:b', { n: 2 })
        await store.bus.publish('session:a', { n: 1 })
      })
      unsubscribe()
      await handedOut(async () => await store.bus.publish('session:a', { n: 3 }))
      stay()
      expect(seen).toEqual([{ n: 1 }])
      expect(stayed).toEqual([{ n: 1 }, { n: 3 }])
    })

    it('reports itself healthy', async () => {
      expect(await store.health()).toMatchObject({ ok: true, kind: store.kind })
    })
  })
}
