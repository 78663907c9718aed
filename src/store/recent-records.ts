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

/** What a record costs beyond the text it was read from (its object, its key, the map's entry), roughly. */
const RECORD_OVERHEAD_BYTES = 512

/**
 * The most recently used records of a store whose only writer is this process (the SQLite file lock makes it
 * so): a read that finds its record here needs no query. At most `limit` records, and at most `maxBytes` of
 * the text they were read from (a task's request and result can be megabytes each, so a count alone bounds
 * nothing): the least recently used go first. Every write of a record replaces or drops its entry; records are
 * frozen (see deepFreeze) and handed out as they are.
 */
export class RecentRecords<V> {
  readonly #limit: number
  readonly #maxBytes: number
  readonly #records = new Map<string, { record: V, bytes: number }>()
  #bytes = 0

  constructor (limit: number, maxBytes: number) {
    this.#limit = limit
    this.#maxBytes = maxBytes
  }

  get (key: string): V | undefined {
    const entry = this.#records.get(key)
    if (entry === undefined) return undefined
    // Most recent last: the first entry is the one to evict.
    this.#records.delete(key)
    this.#records.set(key, entry)
    return entry.record
  }

  /**
   * Keeps `record` (frozen here) as the newest and returns it; `textBytes` is the size of the text it was read
   * from. A record larger than a quarter of the budget is handed out but not kept.
   */
  set (key: string, record: V, textBytes: number): V {
    this.delete(key)
    const bytes = textBytes + RECORD_OVERHEAD_BYTES
    if (bytes > this.#maxBytes / 4) return deepFreeze(record)
    this.#records.set(key, { record: deepFreeze(record), bytes })
    this.#bytes += bytes
    while (this.#records.size > this.#limit || this.#bytes > this.#maxBytes) {
      const oldest = this.#records.keys().next().value!
      this.delete(oldest)
    }
    return record
  }

  /** Replaces a kept record by `change(record)` (frozen here), counted as the same size; nothing when it is not kept. */
  update (key: string, change: (record: V) => V): void {
    const entry = this.#records.get(key)
    if (entry !== undefined) entry.record = deepFreeze(change(entry.record))
  }

  delete (key: string): void {
    const entry = this.#records.get(key)
    if (entry === undefined) return
    this.#records.delete(key)
    this.#bytes -= entry.bytes
  }

  clear (): void {
    this.#records.clear()
    this.#bytes = 0
  }

  /** The records kept, and the text bytes they account for (overhead included). */
  get size (): { records: number, bytes: number } {
    return { records: this.#records.size, bytes: this.#bytes }
  }
}
