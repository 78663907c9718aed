import type { GatewayStore, LeaseStore, SessionRecord, SessionStore, StoreHealth } from '../types.ts'
import { MemoryBus } from './memory-bus.ts'
import { MemoryTaskStore } from './memory-task-store.ts'

class MemorySessionStore implements SessionStore {
  readonly #sessions = new Map<string, SessionRecord>()

  async create (session: SessionRecord): Promise<void> {
    this.#sessions.set(session.id, { ...session })
  }

  async get (id: string): Promise<SessionRecord | null> {
    const session = this.#sessions.get(id)
    return session ? { ...session } : null
  }

  async touch (id: string, at: number): Promise<void> {
    const session = this.#sessions.get(id)
    if (session && at > session.lastSeenAt) session.lastSeenAt = at
  }

  async delete (id: string): Promise<boolean> {
    return this.#sessions.delete(id)
  }

  async sweep (before: number): Promise<string[]> {
    const gone: string[] = []
    for (const [id, session] of this.#sessions) {
      if (session.lastSeenAt < before) {
        this.#sessions.delete(id)
        gone.push(id)
      }
    }
    return gone
  }
}

/** Process leases in a Map (used by stores that serve one process; also the reference for the contract). */
export class MemoryLeaseStore implements LeaseStore {
  readonly #until = new Map<string, number>()

  async renew (owner: string, until: number): Promise<void> {
    this.#until.set(owner, until)
  }

  async alive (owner: string, now: number): Promise<boolean> {
    return (this.#until.get(owner) ?? -Infinity) > now
  }

  async lapsed (now: number): Promise<string[]> {
    return [...this.#until].filter(([, until]) => until <= now).map(([owner]) => owner)
  }

  async release (owner: string): Promise<void> {
    this.#until.delete(owner)
  }
}

/** Ephemeral store: everything is lost when the process exits. For tests and throwaway runs. */
export class MemoryStore implements GatewayStore {
  readonly kind = 'memory'
  readonly shared = false
  readonly sessions = new MemorySessionStore()
  readonly tasks = new MemoryTaskStore()
  readonly bus = new MemoryBus()
  readonly leases = new MemoryLeaseStore()

  async health (): Promise<StoreHealth> {
    return { ok: true, kind: this.kind }
  }

  async close (): Promise<void> {}
}
