/** Keys read by one statement at most: its array parameter and its answer stay small. */
const MOST_KEYS = 500

/** One caller waiting for its key's row. */
interface Waiter {
  key: string
  now: number
  resolve: (text: string | undefined) => void
  reject: (err: unknown) => void
}

/**
 * Reads the rows of many keys in one statement: `(keys, now) → [key, row as JSON text][]`, `now` the earliest of
 * the callers' (each caller then judges the row with its own, see ReadBatch).
 */
export type ReadMany = (keys: string[], now: number) => Promise<Array<{ id: string, t: string }>>

/**
 * The per-request reads of a busy process (a task by id for `tasks/get`, a session by id for every request of a
 * 2025 client) made together: the reads asked for in one turn of the event loop become one statement
 * (`WHERE id = ANY($1)`) at its end (setImmediate), instead of one statement, one pooled connection and one
 * network round trip each. Under load this is what costs on both sides: every statement is a write to a socket,
 * a row description and a completion to parse here, and a wake-up, a bind and an execute of a server backend
 * that shares the machine's cores.
 *
 * Nothing is kept between turns, so a read sees every write that committed before it was asked for (on any
 * process): its statement starts after the call. Each caller gets its own row, parsed from the text for it alone
 * (two callers of one key never share an object), or undefined; when the statement fails, every caller of it gets
 * its error (the store's GW_ERR_STORE_UNAVAILABLE), as each would have with a statement of its own.
 */
export class ReadBatch {
  readonly #read: ReadMany
  #waiting: Waiter[] = []
  #scheduled = false

  constructor (read: ReadMany) {
    this.#read = read
  }

  /** The row of `key` as JSON text (undefined when there is none); `now` is passed to the statement (the earliest of the batch). */
  async read (key: string, now = 0): Promise<string | undefined> {
    return await new Promise<string | undefined>((resolve, reject) => {
      this.#waiting.push({ key, now, resolve, reject })
      if (this.#scheduled) return
      this.#scheduled = true
      setImmediate(() => { this.#flush() })
    })
  }

  #flush (): void {
    this.#scheduled = false
    const waiting = this.#waiting
    this.#waiting = []
    for (let start = 0; start < waiting.length;) {
      // Up to MOST_KEYS distinct keys per statement; a key asked for twice is read once.
      const batch = new Map<string, Waiter[]>()
      let end = start
      for (; end < waiting.length; end++) {
        const waiter = waiting[end]!
        const same = batch.get(waiter.key)
        if (same) same.push(waiter)
        else if (batch.size < MOST_KEYS) batch.set(waiter.key, [waiter])
        else break
      }
      this.#run(batch, waiting.slice(start, end))
      start = end
    }
  }

  #run (batch: Map<string, Waiter[]>, waiters: Waiter[]): void {
    const now = waiters.reduce((earliest, w) => Math.min(earliest, w.now), Number.POSITIVE_INFINITY)
    this.#read([...batch.keys()], now).then((rows) => {
      for (const { id, t } of rows) {
        for (const waiter of batch.get(id) ?? []) waiter.resolve(t)
        batch.delete(id)
      }
      for (const missing of batch.values()) for (const waiter of missing) waiter.resolve(undefined)
    }, (err: unknown) => {
      for (const waiter of waiters) waiter.reject(err)
    })
  }
}
