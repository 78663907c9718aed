import { performance } from 'node:perf_hooks'
import type { GatewayStore, InputRecord, TaskRecord } from './types.ts'
import type { HistogramSeries } from '../observability/bucket-histogram.ts'
import type { GatewayMetrics } from '../observability/metrics.ts'

type Method = (...args: unknown[]) => unknown
/** Told of each operation that succeeded: its arguments and what it resolved to. */
type Hook = (args: unknown[], value: unknown) => void

/** The names of the methods of `target`, its own and its classes' (a store part has methods only). */
function methodNames (target: object): string[] {
  const names = new Set<string>()
  for (
    let level: object | null = target;
    level !== null && level !== Object.prototype;
    level = Object.getPrototypeOf(level) as object | null
  ) {
    for (const name of Object.getOwnPropertyNames(level)) {
      if (name !== 'constructor' && typeof (target as Record<string, unknown>)[name] === 'function') names.add(name)
    }
  }
  return [...names]
}

/**
 * `target`'s methods, each one that returns a promise timed as `<part>.<method>` (latency, and errors by
 * class); `hooks` hear what chosen operations did. The wrappers are made once, on a plain object: nothing
 * is looked up per call.
 */
function timed<T extends object> (target: T, part: string, metrics: GatewayMetrics, hooks: Partial<Record<string, Hook>> = {}): T {
  const wrapper: Record<string, Method> = {}
  for (const name of methodNames(target)) {
    const original = (target as Record<string, Method>)[name]!
    const operation = `${part}.${name}`
    const hook = hooks[name]
    // Made at the first call: an operation never used adds no series to the exposition.
    let latency: HistogramSeries | undefined
    wrapper[name] = (...args: unknown[]): unknown => {
      const start = performance.now()
      const result = original.apply(target, args)
      if (!(result instanceof Promise)) return result
      const series = latency ??= metrics.storeOperation(operation)
      // Observed beside the caller, which gets the store's own promise: no extra hop before it goes on.
      result.then((resolved: unknown) => {
        series.observe((performance.now() - start) / 1000)
        hook?.(args, resolved)
      }, (err: unknown) => {
        series.observe((performance.now() - start) / 1000)
        metrics.storeError(operation, err)
      })
      return result
    }
  }
  return wrapper as T
}

/**
 * The store with each operation timed (gateway_store_operation_duration_seconds) and its failures counted,
 * in one place for every backend. The task record operations also feed the task metrics: what was created,
 * which moves won, which input requests were queued and settled.
 */
export function timedStore (store: GatewayStore, metrics: GatewayMetrics): GatewayStore {
  const tasks = timed(store.tasks, 'tasks', metrics, {
    create: (args) => metrics.taskCreated(args[0] as TaskRecord),
    transition: (args, moved) => { if (moved !== null) metrics.taskMoved(moved as TaskRecord, args[4] as number) },
    addInput: (args) => metrics.inputQueued((args[0] as InputRecord).method),
    settleInput: (args, settled) => { if (settled === true) metrics.inputSettled(args[1] as 'answered' | 'expired') },
  })
  return {
    kind: store.kind,
    shared: store.shared,
    durable: store.durable,
    sessions: timed(store.sessions, 'sessions', metrics),
    tasks,
    bus: timed(store.bus, 'bus', metrics),
    leases: timed(store.leases, 'leases', metrics),
    homes: timed(store.homes, 'homes', metrics),
    rateLimits: timed(store.rateLimits, 'rateLimits', metrics),
    grants: timed(store.grants, 'grants', metrics),
    health: () => store.health(),
    close: () => store.close(),
  }
}
