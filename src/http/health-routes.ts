import type { FastifyInstance } from 'fastify'
import type { GatewayStore } from '../store/types.ts'
import type { UpstreamPool } from '../upstream/upstream-pool.ts'

/**
 * `/healthz`: the process is up. `/readyz`: the store answers and at least one upstream is ready;
 * every upstream is listed with its state and, when it is not ready, why.
 */
export function registerHealthRoutes (app: FastifyInstance, store: GatewayStore, pools: readonly UpstreamPool[]): void {
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
    const ok = storeHealth.ok && readyCount > 0
    const status = !ok ? 'unavailable' : readyCount < upstreams.length ? 'degraded' : 'ready'
    return reply.code(ok ? 200 : 503).send({ status, store: storeHealth, upstreams })
  })
}
