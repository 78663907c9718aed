import type { FastifyInstance } from 'fastify'
import type { GatewayStore } from '../store/types.ts'
import type { Upstream } from '../upstream/upstream.ts'

/**
 * `/healthz`: the process is up (from the moment it listens). `/readyz`: the store answers, at least one
 * upstream is ready and the process is not shutting down (`draining`: a balancer should stop sending it
 * requests; `starting`: no upstream has finished its first connect yet); every upstream is listed with its
 * state and, when it is not ready, why (`starting` ones are still in their first connect). A process shutting
 * down says how many running tasks it handed over to other processes (`handedOver`).
 */
export function registerHealthRoutes (
  app: FastifyInstance,
  store: GatewayStore,
  upstreams: readonly Upstream[],
  isClosing: () => boolean,
  handedOver: () => number = () => 0,
): void {
  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_request, reply) => {
    const storeHealth = await store.health()
    const states = upstreams.map((upstream) => {
      const load = upstream.load
      return {
        name: upstream.name,
        state: upstream.state,
        ...(upstream.reason !== undefined && { reason: upstream.reason }),
        sessions: load.sessions,
        calls: { active: load.active, waiting: load.waiting, parked: load.parked },
        ...(upstream.resultsWithoutResultType > 0 && { resultsWithoutResultType: upstream.resultsWithoutResultType }),
      }
    })
    const readyCount = states.filter((u) => u.state === 'ready').length
    const draining = isClosing()
    const ok = storeHealth.ok && readyCount > 0 && !draining
    const starting = states.some((u) => u.state === 'starting')
    const status = draining ? 'draining' : !ok ? (starting && storeHealth.ok ? 'starting' : 'unavailable') : readyCount < states.length ? 'degraded' : 'ready'
    const handed = handedOver()
    return reply.code(ok ? 200 : 503).send({ status, store: storeHealth, upstreams: states, ...(handed > 0 && { handedOver: handed }) })
  })
}
