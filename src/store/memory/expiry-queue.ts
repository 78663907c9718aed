/** A task id and when its TTL ends (epoch ms). */
interface Due {
  at: number
  id: string
}

/**
 * Task ids by the end of their TTL, soonest first (a binary min-heap): the sweep takes those that are due
 * without looking at any other task, so its cost grows with what it removes, not with what the store holds.
 * A task's TTL never changes, so an entry stays right until the sweep takes it; an entry whose task is gone
 * already is taken and ignored.
 */
export class ExpiryQueue {
  readonly #heap: Due[] = []

  get size (): number {
    return this.#heap.length
  }

  add (id: string, at: number): void {
    const heap = this.#heap
    heap.push({ at, id })
    let child = heap.length - 1
    while (child > 0) {
      const parent = (child - 1) >>> 1
      if (heap[parent]!.at <= heap[child]!.at) break
      this.#swap(parent, child)
      child = parent
    }
  }

  /** Removes and returns the ids due at `now` (at ≤ now), soonest first. */
  takeDue (now: number): string[] {
    const due: string[] = []
    while (this.#heap.length > 0 && this.#heap[0]!.at <= now) due.push(this.#pop())
    return due
  }

  #pop (): string {
    const heap = this.#heap
    const top = heap[0]!
    const last = heap.pop()!
    if (heap.length > 0) {
      heap[0] = last
      let parent = 0
      for (;;) {
        const left = 2 * parent + 1
        const right = left + 1
        let least = parent
        if (left < heap.length && heap[left]!.at < heap[least]!.at) least = left
        if (right < heap.length && heap[right]!.at < heap[least]!.at) least = right
        if (least === parent) break
        this.#swap(parent, least)
        parent = least
      }
    }
    return top.id
  }

  #swap (a: number, b: number): void {
    const heap = this.#heap
    const held = heap[a]!
    heap[a] = heap[b]!
    heap[b] = held
  }
}
