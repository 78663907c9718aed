import type { FastifyInstance } from 'fastify'
import type { AdminConfig } from '../config/schema.ts'
import type { Logger } from '../observability/logger.ts'
import type { GatewayStore } from '../store/types.ts'
import type { TaskService } from '../tasks/task-service.ts'
import type { Upstream } from '../upstream/upstream.ts'
import { createAdminApp } from './admin-server.ts'
import { registerTaskRoutes } from './task-routes.ts'
import { registerUpstreamRoutes } from './upstream-routes.ts'

export interface AdminDeps {
  store: GatewayStore
  upstreams: readonly Upstream[]
  tasks: TaskService
  /** Stops this process taking new MCP requests, as a shutdown does; `/readyz` then says draining. */
  drain (): void
}

/**
 * The admin API's routes. Other parts of the gateway add theirs to the same instance (it checks the admin
 * token for every route) with their own `register…(app, deps)` before the instance listens.
 */
export function registerAdminRoutes (app: FastifyInstance, deps: AdminDeps): void {
  registerUpstreamRoutes(app, deps.upstreams)
  registerTaskRoutes(app, { store: deps.store.tasks, tasks: deps.tasks })
  // Idempotent; there is no undrain: restart the process to take requests again.
  app.post('/admin/drain', async (request) => {
    deps.drain()
    request.log.warn({ audit: 'process.drain' }, 'draining: new MCP requests are refused, /readyz says draining')
    return { status: 'draining' }
  })
}

/** The admin API with its routes when `admin` is configured, else undefined (no listener, no routes). */
export function createAdmin (config: AdminConfig | undefined, log: Logger, deps: AdminDeps): FastifyInstance | undefined {
  if (config === undefined) return undefined
  const app = createAdminApp(config, log)
  registerAdminRoutes(app, deps)
  return app
}
