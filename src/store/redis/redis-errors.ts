import { ReplyError } from 'ioredis'
import { GatewayError } from '../../errors.ts'

/** A Redis failure as the gateway's own error; the backend's error (which may name hosts) stays in `cause`. */
export function unavailable (err: unknown): GatewayError {
  if (err instanceof GatewayError) return err
  const what = err instanceof ReplyError ? 'Redis rejected a command' : 'Redis is unreachable'
  return new GatewayError('GW_ERR_STORE_UNAVAILABLE', [what], { cause: err })
}

/**
 * The same object, with every method that returns a promise rejecting with GW_ERR_STORE_UNAVAILABLE
 * instead of a backend error (Redis down, connection reset, command timeout).
 */
export function guarded<T extends object> (target: T): T {
  return new Proxy(target, {
    get (object, property) {
      const value: unknown = Reflect.get(object, property, object)
      if (typeof value !== 'function') return value
      return (...args: unknown[]) => {
        const result: unknown = value.apply(object, args)
        return result instanceof Promise ? result.catch((err: unknown) => { throw unavailable(err) }) : result
      }
    },
  })
}
