import { performance } from 'node:perf_hooks'
import type { GatewayStore, InputRecord, TaskRecord } from '../store/types.ts'
import type { GatewayMetrics } from './metrics.ts'

type Method = (...args: unknown[]) => unknown
/** Told of each operation that succeeded: its arguments and what it resolved to. */
type Hook = (args: unknown[], value: unknown) => void

/**
 * `target` with every method that returns a promise timed as `<part>.<method>` (latency, and errors by
 * class); `hooks` hear what chosen operations did. Wrapped methods are made once per name.
 */
function timed<T extends object> (target: T, part: string, metrics: GatewayMetrics, hooks: Partial<Record<string, Hook>> = {}): T {
  const wrapped = new Map<PropertyKey, Method>()
  return new Proxy(target, {
    get (object, property) {
      const value: unknown = Reflect.get(object, property, object)
      if (typeof value !== 'function' || typeof property !== 'string') return value
      let method = wrapped.get(property)
      if (method === undefined) {
        const original = value as Method
        const operation = `${part}.${property}`
        const hook = hooks[property]
        const latency = metrics.storeOperation(operation)
        method = (...args: unknown[]): unknown => {
          const start = performance.now()
          const result = original.apply(object, args)
          if (!(result instanceof Promise)) return result
          return result.then((resolved: unknown) => {
            latency.observe((performance.now() - start) / 1000)
            hook?.(args, resolved)
            return resolved
          }, (err: unknown) => {
            latency.observe((performance.now() - start) / 1000)
            metrics.storeError(operation, err)
            throw err
          })
        }
        wrapped.set(property, method)
      }
      return method
    },
  })
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
  const parts = {
    sessions: timed(store.sessions, 'sessions', metrics),
    tasks,
    bus: timed(store.bus, 'bus', metrics),
    leases: timed(store.leases, 'leases', metrics),
    homes: timed(store.homes, 'homes', metrics),
    rateLimits: timed(store.rateLimits, 'rateLimits', metrics),
  }
  return new Proxy(store, {
    get (object, property) {
      if (typeof property === 'string' && property in parts) return parts[property as keyof typeof parts]
      const value: unknown = Reflect.get(object, property, object)
      return typeof value === 'function' ? (value as Method).bind(object) : value
    },
  })
}
