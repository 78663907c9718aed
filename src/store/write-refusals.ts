import type { StoreHealth } from './types.ts'

/** When the store began refusing writes and why. */
export interface Refusal {
  at: number
  reason: string
}

/** Says whether a store failure is a refused write, and why (undefined: some other failure). */
export type RefusalOf = (err: unknown) => string | undefined

/**
 * Writes the backend refuses (a full disk under SQLite), in one place: a store part watched here has each
 * failure of its operations classified; the first refused one is recorded (time, reason) and lasts until an
 * operation that was refused succeeds again. Readiness reports the store not ready meanwhile (`health`).
 */
export class WriteRefusals {
  readonly #now: () => number
  readonly #changed: (refusal: Refusal | undefined) => void
  #refusal: Refusal | undefined
  /** The operations (`<part>.<method>`) refused since the refusal began: one of them succeeding ends it. */
  readonly #refused = new Set<string>()

  /** `changed` hears when a refusal begins and when it ends (undefined). */
  constructor (changed: (refusal: Refusal | undefined) => void = () => {}, now: () => number = Date.now) {
    this.#changed = changed
    this.#now = now
  }

  get current (): Refusal | undefined {
    return this.#refusal
  }

  /** `target` with every operation that returns a promise watched: refusals recorded, the end of one noticed. */
  watch<T extends object> (target: T, part: string, refusalOf: RefusalOf): T {
    return new Proxy(target, {
      get: (object, property) => {
        const value: unknown = Reflect.get(object, property, object)
        if (typeof value !== 'function') return value
        const operation = `${part}.${String(property)}`
        return (...args: unknown[]) => {
          const result: unknown = value.apply(object, args)
          if (!(result instanceof Promise)) return result
          return result.then((resolved: unknown) => {
            this.#succeeded(operation)
            return resolved
          }, (err: unknown) => {
            const reason = refusalOf(err)
            if (reason !== undefined) this.#failed(operation, reason)
            throw err
          })
        }
      },
    })
  }

  #failed (operation: string, reason: string): void {
    this.#refused.add(operation)
    if (this.#refusal !== undefined) return
    this.#refusal = { at: this.#now(), reason }
    this.#changed(this.#refusal)
  }

  #succeeded (operation: string): void {
    if (this.#refusal === undefined || !this.#refused.has(operation)) return
    this.#refusal = undefined
    this.#refused.clear()
    this.#changed(undefined)
  }

  /** `health` as readiness reports it: not ready, naming the reason and since when, while writes are refused. */
  health (health: StoreHealth): StoreHealth {
    const refusal = this.#refusal
    if (refusal === undefined || !health.ok) return health
    return { ...health, ok: false, detail: `${refusal.reason} (since ${new Date(refusal.at).toISOString()})` }
  }
}
