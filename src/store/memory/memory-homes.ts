import type { HomeStore } from '../types.ts'

/** Client homes in a Map, for the stores that serve one process (memory, SQLite), and the contract's reference. */
export class MemoryHomeStore implements HomeStore {
  readonly #homes = new Map<string, { home: string, until: number }>()
  readonly #now: () => number

  constructor (now: () => number = Date.now) {
    this.#now = now
  }

  async claim (client: string, from: string | null, to: string, ttlMs: number): Promise<string> {
    const now = this.#now()
    const current = this.#live(client, now)
    if (current === undefined || current === from || current === to) {
      this.#homes.set(client, { home: to, until: now + ttlMs })
      return to
    }
    return current
  }

  async renew (home: string, clients: readonly string[], ttlMs: number): Promise<string[]> {
    const now = this.#now()
    const lost: string[] = []
    for (const client of clients) {
      if (this.#live(client, now) === home) this.#homes.set(client, { home, until: now + ttlMs })
      else lost.push(client)
    }
    return lost
  }

  async release (client: string, home: string): Promise<void> {
    if (this.#homes.get(client)?.home === home) this.#homes.delete(client)
  }

  #live (client: string, now: number): string | undefined {
    const entry = this.#homes.get(client)
    if (entry === undefined) return undefined
    if (entry.until > now) return entry.home
    this.#homes.delete(client)
    return undefined
  }
}
