import type { FastifyInstance } from 'fastify'
import type { GatewayStore } from '../store/types.ts'
import type { UpstreamPool } from '../upstream/upstream-pool.ts'

/**
 * `/healthz`: the process is up. `/readyz`: the store answers, at least one upstream is ready and the
 * process is not shutting down (`draining`: a balancer should stop sending it requests); every upstream
 * is listed with its state and, when it is not ready, why.
 */
export function registerHealthRoutes (app: FastifyInstance, store: GatewayStore, pools: readonly UpstreamPool[], isClosing: () => boolean): void {
  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_request, reply) => {
    const storeHealth = await store.health()
    const upstreams = pools.map((pool) => ({
      name: pool.name,
      state: pool.state,
      ...(pool.state !== 'ready' && pool.lastError !== undefined && { reason: pool.lastError }),
      calls: pool.load,
    }))
    const readyCount = upstreams.filter((u) => u.state === 'ready').length
    const draining = isClosing()
    const ok = storeHealth.ok && readyCount > 0 && !draining
    const status = draining ? 'draining' : !ok ? 'unavailable' : readyCount < upstreams.length ? 'degraded' : 'ready'
    return reply.code(ok ? 200 : 503).send({ status, store: storeHealth, upstreams })
  })
}
