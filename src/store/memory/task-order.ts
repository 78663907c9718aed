import type { TaskCursor } from '../types.ts'

/** One task's place in a list: its position (createdAt, then id) and when it expires (Infinity: never). */
export interface OrderEntry extends TaskCursor {
  expiresAt: number
}

/** Entries per block at most; a block that outgrows it is split in two. */
const BLOCK = 512

/** A run of entries in list order, with the latest expiry among them (a block whose entries all expired is skipped). */
interface Block {
  entries: OrderEntry[]
  latest: number
}

/** Task order: createdAt, then id (compared by code unit, like SQLite's BINARY collation for ASCII ids). */
export function byPosition (a: TaskCursor, b: TaskCursor): number {
  if (a.createdAt !== b.createdAt) return a.createdAt - b.createdAt
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0
}

/** The first index of `entries` whose entry is after `cursor` (or at it, when `inclusive`). */
function firstAfter (entries: readonly OrderEntry[], cursor: TaskCursor, inclusive: boolean): number {
  let low = 0
  let high = entries.length
  while (low < high) {
    const mid = (low + high) >>> 1
    const order = byPosition(entries[mid]!, cursor)
    if (order > 0 || (inclusive && order === 0)) high = mid
    else low = mid + 1
  }
  return low
}

function latestOf (entries: readonly OrderEntry[]): number {
  let latest = -Infinity
  for (const entry of entries) if (entry.expiresAt > latest) latest = entry.expiresAt
  return latest
}

/**
 * The tasks of one principal in list order, kept on every write so that a page is read without sorting: blocks
 * of at most BLOCK entries, found by binary search (a cursor costs O(log n)), each knowing the latest expiry of its
 * entries, so that a page passes over a block of tasks past their TTL (waiting for the sweep) without looking at
 * them one by one. `visited` counts the entries a page looked at: what a page costs, for tests and the bench.
 */
export class TaskOrder {
  readonly #blocks: Block[] = []
  #size = 0
  visited = 0

  get size (): number {
    return this.#size
  }

  add (entry: OrderEntry): void {
    this.#size++
    const at = this.#blockOf(entry)
    const block = this.#blocks[at]
    if (!block) {
      this.#blocks.push({ entries: [entry], latest: entry.expiresAt })
      return
    }
    const entries = block.entries
    // Tasks mostly arrive in order: the end of the last block.
    if (entries.length === 0 || byPosition(entries[entries.length - 1]!, entry) < 0) entries.push(entry)
    else entries.splice(firstAfter(entries, entry, false), 0, entry)
    if (entry.expiresAt > block.latest) block.latest = entry.expiresAt
    if (entries.length > 2 * BLOCK) {
      const tail = entries.splice(BLOCK)
      block.latest = latestOf(entries)
      this.#blocks.splice(at + 1, 0, { entries: tail, latest: latestOf(tail) })
    }
  }

  /** Removes the entry at `cursor`; false when there is none. */
  remove (cursor: TaskCursor): boolean {
    const at = this.#blockOf(cursor)
    const block = this.#blocks[at]
    if (!block) return false
    const index = firstAfter(block.entries, cursor, true)
    const entry = block.entries[index]
    if (!entry || byPosition(entry, cursor) !== 0) return false
    block.entries.splice(index, 1)
    this.#size--
    if (block.entries.length === 0) this.#blocks.splice(at, 1)
    else if (entry.expiresAt === block.latest) block.latest = latestOf(block.entries)
    return true
  }

  /** Up to `limit` ids of entries after `after` (all, without it) that have not expired at `now`, in order. */
  page (after: TaskCursor | undefined, limit: number, now: number): string[] {
    const ids: string[] = []
    if (limit <= 0) return ids
    let at = after ? this.#blockOf(after) : 0
    let index = after && this.#blocks[at] ? firstAfter(this.#blocks[at]!.entries, after, false) : 0
    for (; at < this.#blocks.length; at++, index = 0) {
      const block = this.#blocks[at]!
      if (block.latest <= now) continue
      const entries = block.entries
      for (; index < entries.length; index++) {
        this.visited++
        const entry = entries[index]!
        if (entry.expiresAt <= now) continue
        ids.push(entry.id)
        if (ids.length >= limit) return ids
      }
    }
    return ids
  }

  /** The block that holds `cursor`'s position: the first whose last entry is at or after it (the last block when none is). */
  #blockOf (cursor: TaskCursor): number {
    let low = 0
    let high = this.#blocks.length
    while (low < high) {
      const mid = (low + high) >>> 1
      const entries = this.#blocks[mid]!.entries
      if (byPosition(entries[entries.length - 1]!, cursor) >= 0) high = mid
      else low = mid + 1
    }
    return Math.min(low, Math.max(0, this.#blocks.length - 1))
  }
}
