/** A store found emptied under the gateway: what it held before `at` is gone. */
export interface StoreLoss {
  at: number
  /** What happened, for logs and /readyz (e.g. Redis flushed, or restarted without persistence). */
  reason: string
}

/** Notices a store that lost what it held (a Redis emptied under the gateway); see RedisEpoch. */
export interface DataLossWatch {
  /** `listener` hears each loss found, once; returns the unsubscribe function. */
  onLoss (listener: (loss: StoreLoss) => void): () => void
  /** Checks now (a task this process knew is missing); resolves after the listeners heard of a loss found. */
  check (): Promise<void>
}
