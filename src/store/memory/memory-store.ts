import { GatewayError } from '../../errors.ts'
import type { GatewayStore, LeaseStore, SessionCreateOptions, SessionRecord, SessionStore, StoreHealth } from '../types.ts'
import { MemoryRateLimits } from './memory-rate-limits.ts'
import { MemoryBus } from './memory-bus.ts'
import { MemoryTaskStore } from './memory-task-store.ts'
import { MemoryHomeStore } from './memory-homes.ts'
import { MemoryGrantStore } from './memory-grants.ts'
import { AccountBytes, overBudget, sessionBytes } from '../stored-bytes.ts'

class MemorySessionStore implements SessionStore {
  readonly #sessions = new Map<string, SessionRecord>()
  /** Session ids of each account (SessionCreateOptions.account), so counting them does not scan every session. */
  readonly #byAccount = new Map<string, Set<string>>()
  /** The account of each session whose account is not its principal. */
  readonly #accounts = new Map<string, string>()
  /** The bytes each account stores, shared with the task store. */
  readonly #bytes: AccountBytes

  constructor (bytes: AccountBytes) {
    this.#bytes = bytes
  }

  async create (session: SessionRecord, options: SessionCreateOptions = {}): Promise<void> {
    const account = options.account ?? session.principal
    const max = options.maxSessions
    if (max !== undefined && (this.#byAccount.get(account)?.size ?? 0) >= max) throw new GatewayError('GW_ERR_SESSION_LIMIT', [max])
    const bytes = sessionBytes(session)
    const refusal = overBudget(this.#bytes.of(account), bytes, options.maxStoredBytes)
    if (refusal) throw refusal
    this.#bytes.add(account, bytes)
    this.#sessions.set(session.id, { ...session })
    if (account !== session.principal) this.#accounts.set(session.id, account)
    const ids = this.#byAccount.get(account) ?? new Set()
    this.#byAccount.set(account, ids.add(session.id))
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
    const session = this.#sessions.get(id)
    if (!session) return false
    this.#forget(session)
    return true
  }

  async sweep (before: number): Promise<string[]> {
    const gone: string[] = []
    for (const [id, session] of this.#sessions) {
      if (session.lastSeenAt < before) {
        this.#forget(session)
        gone.push(id)
      }
    }
    return gone
  }

  async countOf (account: string, atMost: number): Promise<number> {
    return Math.min(atMost, this.#byAccount.get(account)?.size ?? 0)
  }

  #forget (session: SessionRecord): void {
    this.#sessions.delete(session.id)
    const account = this.#accounts.get(session.id) ?? session.principal
    this.#accounts.delete(session.id)
    this.#bytes.add(account, -sessionBytes(session))
    const ids = this.#byAccount.get(account)
    ids?.delete(session.id)
    if (ids?.size === 0) this.#byAccount.delete(account)
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
  readonly durable = false
  /** What each account stores, counted by both the sessions and the tasks. */
  readonly #bytes = new AccountBytes()
  readonly sessions = new MemorySessionStore(this.#bytes)
  readonly tasks = new MemoryTaskStore(this.#bytes)
  readonly bus = new MemoryBus()
  readonly leases = new MemoryLeaseStore()
  readonly homes = new MemoryHomeStore()
  readonly rateLimits = new MemoryRateLimits()
  readonly grants = new MemoryGrantStore()

  async health (): Promise<StoreHealth> {
    return { ok: true, kind: this.kind }
  }

  async close (): Promise<void> {}
}
