import { randomBytes } from 'node:crypto'
import type { Redis } from 'ioredis'
import type { Logger } from '../../observability/logger.ts'
import type { DataLossWatch, StoreLoss } from '../data-loss.ts'
import { ignoreWithTrace } from '../../observability/ignored.ts'

/** How long /readyz mentions a loss after it was found: long enough for an operator to look. */
const LOSS_SHOWN_MS = 15 * 60_000

/** Not yet known: the key was found gone and the new epoch could not be written yet. */
const UNWRITTEN = ''

/**
 * The store's epoch: `<prefix>epoch`, a random value written by the first gateway process on an empty Redis
 * and never changed after. A Redis emptied under the gateway (FLUSHALL, or a restart without persistence)
 * has lost it: a process that finds it gone or changed (another process found it gone first and wrote a new
 * one) knows that every task and session stored before then is gone, tells its listeners once, and takes the
 * new epoch (writing it when it is the first to notice). Checked on each new connection, on each renewal of
 * the process's lease, and on demand (a task the process knew is missing). A GET first: a Redis that refuses
 * writes (out of memory) can still be checked.
 */
export class RedisEpoch implements DataLossWatch {
  readonly #redis: Redis
  readonly #key: string
  readonly #log: Logger | undefined
  readonly #listeners = new Set<(loss: StoreLoss) => void>()
  /** The epoch this process knows; undefined before start(). */
  #known: string | undefined
  #checking: Promise<void> | undefined
  #last: StoreLoss | undefined

  constructor (redis: Redis, prefix: string, log?: Logger) {
    this.#redis = redis
    this.#key = `${prefix}epoch`
    this.#log = log
  }

  /** Takes the store's epoch, writing it when there is none yet (the first process on this Redis). */
  async start (): Promise<void> {
    if (this.#known !== undefined) return
    this.#known = await this.#current() ?? await this.#write()
  }

  onLoss (listener: (loss: StoreLoss) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  /** Checks now; concurrent calls share one check. A store that cannot be read is not a loss. */
  async check (): Promise<void> {
    if (this.#known === undefined) return
    this.#checking ??= this.#check()
      .catch(ignoreWithTrace(this.#log, 'the store epoch could not be read; not a loss, checked again next time'))
      .finally(() => { this.#checking = undefined })
    await this.#checking
  }

  /** The latest loss, while /readyz still mentions it. */
  recentLoss (now = Date.now()): StoreLoss | undefined {
    return this.#last !== undefined && now - this.#last.at < LOSS_SHOWN_MS ? this.#last : undefined
  }

  async #check (): Promise<void> {
    const current = await this.#current()
    const known = this.#known
    if (current === known) return
    if (known === UNWRITTEN) {
      // Already told: only the new epoch is still to take (another process may have written it meanwhile).
      this.#known = current ?? await this.#write()
      return
    }
    const loss = {
      at: Date.now(),
      reason: current === null
        ? 'Redis was emptied (flushed, or restarted without persistence): the store epoch key is gone'
        : 'Redis was emptied (flushed, or restarted without persistence): another gateway process found it so and wrote a new store epoch',
    }
    this.#known = current ?? UNWRITTEN
    this.#last = loss
    for (const listener of [...this.#listeners]) {
      try {
        listener(loss)
      } catch (err) {
        this.#log?.error({ err }, 'a listener of a store loss failed')
      }
    }
    if (current === null) this.#known = await this.#write()
  }

  async #current (): Promise<string | null> {
    return await this.#redis.get(this.#key)
  }

  /** Writes a new epoch unless another process just did; resolves with the one in force. */
  async #write (): Promise<string> {
    const mine = randomBytes(12).toString('base64url')
    const theirs = await this.#redis.call('SET', this.#key, mine, 'NX', 'GET') as string | null
    return theirs ?? mine
  }
}
