/**
 * Deep-freezes `value` (objects and arrays, all the way down) and returns it. A store that hands out the records
 * it keeps freezes them first, so no caller can change what the store holds, and no read needs a copy.
 */
export function deepFreeze<T> (value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const child of Object.values(value)) deepFreeze(child)
  }
  return value
}

/**
 * The most recently used records of a store whose only writer is this process (the SQLite file lock makes it
 * so), at most `limit` of them: a read that finds its record here needs no query. Every write of a record
 * replaces or drops its entry; records are frozen (see deepFreeze) and handed out as they are.
 */
export class RecentRecords<V> {
  readonly #limit: number
  readonly #records = new Map<string, V>()

  constructor (limit: number) {
    this.#limit = limit
  }

  get (key: string): V | undefined {
    const record = this.#records.get(key)
    if (record === undefined) return undefined
    // Most recent last: the first entry is the one to evict.
    this.#records.delete(key)
    this.#records.set(key, record)
    return record
  }

  /** Keeps `record` (frozen here) as the newest and returns it. */
  set (key: string, record: V): V {
    this.#records.delete(key)
    this.#records.set(key, deepFreeze(record))
    if (this.#records.size > this.#limit) this.#records.delete(this.#records.keys().next().value!)
    return record
  }

  delete (key: string): void {
    this.#records.delete(key)
  }

  clear (): void {
    this.#records.clear()
  }
}
