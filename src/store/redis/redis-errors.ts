import { ReplyError } from 'ioredis'
import { GatewayError } from '../../errors.ts'

/** Whether Redis refused a write for want of memory (`maxmemory` reached under `noeviction`). */
export function isOutOfMemory (err: unknown): boolean {
  const backend: unknown = err instanceof GatewayError ? err.cause : err
  return backend instanceof ReplyError && (backend as Error).message.startsWith('OOM')
}

/** A Redis failure as the gateway's own error; the backend's error (which may name hosts) stays in `cause`. */
export function unavailable (err: unknown): GatewayError {
  if (err instanceof GatewayError) return err
  const what = isOutOfMemory(err)
    ? 'Redis refuses writes (out of memory)'
    : err instanceof ReplyError ? 'Redis rejected a command' : 'Redis is unreachable'
  return new GatewayError('GW_ERR_STORE_UNAVAILABLE', [what], { cause: err })
}

/**
 * The same object, with every method that returns a promise rejecting with GW_ERR_STORE_UNAVAILABLE
 * instead of a backend error (Redis down, connection reset, command timeout, a write refused); `failed` hears
 * each backend error first.
 */
export function guarded<T extends object> (target: T, failed?: (err: unknown) => void): T {
  return new Proxy(target, {
    get (object, property) {
      const value: unknown = Reflect.get(object, property, object)
      if (typeof value !== 'function') return value
      return (...args: unknown[]) => {
        const result: unknown = value.apply(object, args)
        if (!(result instanceof Promise)) return result
        return result.catch((err: unknown) => {
          failed?.(err)
          throw unavailable(err)
        })
      }
    },
  })
}
