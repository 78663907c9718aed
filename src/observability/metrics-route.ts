import type { FastifyInstance } from 'fastify'
import type { GatewayMetrics } from './metrics.ts'

/**
 * Serves the Prometheus text exposition of `metrics` at `path` on `app` (the admin listener, or the main
 * one when `metrics.listener` is `main`). The gauges of current state are read during the scrape.
 */
export function registerMetricsRoute (app: FastifyInstance, metrics: GatewayMetrics, path: string): void {
  app.get(path, async (_request, reply) => {
    const text = await metrics.registry.metrics()
    return await reply.type(metrics.registry.contentType).send(text)
  })
}
