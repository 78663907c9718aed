import type { GrantRecord, GrantStore } from '../types.ts'

/** A record's place in the Map: its principal and upstream, unambiguously joined. */
function keyOf (principal: string, upstream: string): string {
  return JSON.stringify([principal, upstream])
}

/**
 * Sealed grants in a Map: the memory store's, and where grants go when they can be kept in this process only
 * (no `server.stateSecret` to seal them for a store others read; see grant-vault.ts).
 */
export class MemoryGrantStore implements GrantStore {
  readonly #records = new Map<string, GrantRecord>()

  async put (record: GrantRecord): Promise<void> {
    this.#records.set(keyOf(record.principal, record.upstream), { ...record })
  }

  async get (principal: string, upstream: string, now: number): Promise<GrantRecord | null> {
    const record = this.#records.get(keyOf(principal, upstream))
    return record === undefined || record.expiresAt <= now ? null : { ...record }
  }

  async delete (principal: string, upstream: string, sealed?: string): Promise<boolean> {
    const key = keyOf(principal, upstream)
    const record = this.#records.get(key)
    if (record === undefined || (sealed !== undefined && record.sealed !== sealed)) return false
    return this.#records.delete(key)
  }

  async sweep (now: number): Promise<number> {
    let swept = 0
    for (const [key, record] of this.#records) {
      if (record.expiresAt <= now) {
        this.#records.delete(key)
        swept++
      }
    }
    return swept
  }
}
