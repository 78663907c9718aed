import type { ServerOptions } from 'node:https'
import type { FastifyInstance, LogController } from 'fastify'
import type { AdminConfig } from '../config/schema.ts'
import type { Revision } from '../wire/versions.ts'
import type { Logger } from '../observability/logger.ts'
import type { RecentProblems } from '../observability/recent-problems.ts'
import type { GatewayStore } from '../store/types.ts'
import type { TaskService } from '../tasks/task-service.ts'
import type { UpstreamSurvival } from '../tasks/survival.ts'
import type { LeavingUpstream } from '../reload/reloader.ts'
import type { Upstream } from '../upstream/upstream.ts'
import { registerAdminEvents } from './admin-events.ts'
import { createAdminApp } from './admin-server.ts'
import { registerReloadRoute, type ReloadRouteDeps } from './reload-route.ts'
import { registerDashboard } from './dashboard-routes.ts'
import { registerTaskRoutes } from './task-routes.ts'

/** One upstream as the admin API shows it. */
export interface AdminUpstream {
  name: string
  transport: string
  state: string
  /** Why it is not ready, when it is not. */
  reason?: string
  /** The protocol revision its gateway session speaks; absent while that session is not open. */
  era?: Revision
  /** Upstream sessions of clients, open or opening (the gateway's own session not counted). */
  sessions: number
  /** Stdio only: server processes running, the gateway session's and one per client session. */
  processes?: number
  /** Calls in flight, calls waiting for a call slot (maxConcurrentCalls), and calls waiting on their client, which hold none. */
  calls: { active: number, waiting: number, parked: number }
  /** A configuration reload removed or replaced it (state `draining`): it finishes its calls until `graceEndsAt`. */
  draining?: { why: LeavingUpstream['why'], graceEndsAt: string }
}

export function describeUpstream (upstream: Upstream): AdminUpstream {
  const load = upstream.load
  const era = upstream.era
  return {
    name: upstream.name,
    transport: upstream.config.transport,
    state: upstream.state,
    ...(upstream.reason !== undefined && { reason: upstream.reason }),
    ...(era !== undefined && { era }),
    sessions: load.sessions,
    ...(load.processes !== undefined && { processes: load.processes }),
    calls: { active: load.active, waiting: load.waiting, parked: load.parked },
  }
}

/** Where the admin API finds the upstreams of this process: those configured, and those a reload let go. */
export interface AdminUpstreamSources {
  upstreams: readonly Upstream[]
  /** Upstreams a reload removed or replaced that still finish their calls. */
  leaving (): readonly LeavingUpstream[]
}

/** Every configured upstream with its state and load, then every one still draining after a reload. */
export function describeUpstreams (sources: AdminUpstreamSources): AdminUpstream[] {
  return [
    ...sources.upstreams.map(describeUpstream),
    ...sources.leaving().map(({ upstream, why, graceEndsAt }) => ({
      ...describeUpstream(upstream),
      state: 'draining',
      draining: { why, graceEndsAt: new Date(graceEndsAt).toISOString() },
    })),
  ]
}

/** `GET /admin/upstreams`: the upstreams of this process with their state and load (see describeUpstreams). */
export function registerUpstreamRoutes (app: FastifyInstance, sources: AdminUpstreamSources): void {
  app.get('/admin/upstreams', async () => ({ upstreams: describeUpstreams(sources) }))
}

export interface AdminDeps extends AdminUpstreamSources {
  store: GatewayStore
  tasks: TaskService
  /** This gateway process (the owner named by the tasks it runs). */
  processId: string
  /** This process's recent refusals and errors (kept when metrics are collected); undefined otherwise. */
  problems: RecentProblems | undefined
  /** Stops this process taking new MCP requests, as a shutdown does; `/readyz` then says draining. */
  drain (): void
  /** Reads the configuration file again and puts it in force (POST /admin/reload). */
  reload: ReloadRouteDeps
  /** What becomes of running tasks when a gateway process stops, per upstream (GET /admin/survival). */
  survival (): UpstreamSurvival[]
}

/**
 * The admin API's routes. Other parts of the gateway add theirs to the same instance (it checks the admin
 * token for every route) with their own `register…(app, deps)` before the instance listens.
 */
export function registerAdminRoutes (app: FastifyInstance, deps: AdminDeps): void {
  registerUpstreamRoutes(app, deps)
  registerTaskRoutes(app, { store: deps.store.tasks, tasks: deps.tasks })
  registerReloadRoute(app, deps.reload)
  registerAdminEvents(app, {
    bus: deps.store.bus,
    upstreams: () => describeUpstreams(deps),
    problems: deps.problems,
    processId: deps.processId,
  })
  // What a restart costs: per upstream, the tools whose running tasks are resumed or run again (the rest are
  // lost), and how many running tasks this process handed over as it shut down.
  app.get('/admin/survival', async () => ({ processId: deps.processId, handedOver: deps.tasks.handedOver, upstreams: deps.survival() }))
  // This process's refusals and errors: counts since it started and the most recent ones, newest first.
  app.get('/admin/problems', async () => deps.problems?.snapshot() ?? { counts: [], recent: [] })
  // Idempotent; there is no undrain: restart the process to take requests again.
  app.post('/admin/drain', async (request) => {
    deps.drain()
    request.log.warn({ audit: 'process.drain' }, 'draining: new MCP requests are refused, /readyz says draining')
    return { status: 'draining' }
  })
}

/** The admin API with its routes when `admin` is configured, else undefined (no listener, no routes). */
export function createAdmin (
  config: AdminConfig | undefined,
  log: Logger,
  deps: AdminDeps,
  tls?: ServerOptions,
  logController?: LogController,
): FastifyInstance | undefined {
  if (config === undefined) return undefined
  const app = createAdminApp(config, log, tls, logController)
  registerAdminRoutes(app, deps)
  if (config.dashboard) registerDashboard(app)
  return app
}
