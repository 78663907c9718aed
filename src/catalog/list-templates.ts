/**
 * What a new session of each upstream lists, by list key (the capabilities a client declares and, with
 * forwardAuthorization, its principal and credential). Clients choose their capabilities, so the keys are
 * theirs to multiply: each upstream keeps at most `limit` of them, the least recently used going first.
 * Pinned entries (what the gateway's own session lists, which every client starts from) are never dropped.
 * A dropped entry costs only a read: the next client with that key lists its own session again.
 */
export class ListTemplates<T> {
  readonly #limit: number
  readonly #recent = new Map<string, Map<string, T>>()
  readonly #pinned = new Map<string, Map<string, T>>()

  constructor (limit: number) {
    this.#limit = limit
  }

  get (upstream: string, key: string): T | undefined {
    const pinned = this.#pinned.get(upstream)?.get(key)
    if (pinned !== undefined) return pinned
    const recent = this.#recent.get(upstream)
    const value = recent?.get(key)
    if (value !== undefined) {
      recent!.delete(key)
      recent!.set(key, value)
    }
    return value
  }

  /** Records what a new session with `key` lists; `pinned`: never dropped. */
  set (upstream: string, key: string, value: T, pinned = false): void {
    const map = this.#mapOf(pinned ? this.#pinned : this.#recent, upstream)
    map.delete(key)
    map.set(key, value)
    if (pinned) this.#recent.get(upstream)?.delete(key)
    else if (map.size > this.#limit) map.delete(map.keys().next().value!)
  }

  /** Any entry of the upstream (pinned first): what it listed last, when it is down. */
  any (upstream: string): T | undefined {
    return this.#pinned.get(upstream)?.values().next().value ?? this.#recent.get(upstream)?.values().next().value
  }

  /** Entries kept for the upstream. */
  size (upstream: string): number {
    return (this.#pinned.get(upstream)?.size ?? 0) + (this.#recent.get(upstream)?.size ?? 0)
  }

  forget (upstream: string): void {
    this.#pinned.delete(upstream)
    this.#recent.delete(upstream)
  }

  #mapOf (maps: Map<string, Map<string, T>>, upstream: string): Map<string, T> {
    let map = maps.get(upstream)
    if (map === undefined) {
      map = new Map()
      maps.set(upstream, map)
    }
    return map
  }
}
