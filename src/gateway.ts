import type { FastifyInstance } from 'fastify'
import type { Catalog } from './catalog/catalog.ts'
import type { Config } from './config/schema.ts'
import type { Logger } from './observability/logger.ts'
import type { GatewayMetrics } from './observability/metrics.ts'
import type { ReloadReport } from './reload/reloader.ts'
import type { GatewayStore } from './store/types.ts'
import type { TaskService } from './tasks/task-service.ts'
import type { Upstream } from './upstream/upstream.ts'
import { gatewayJobs, startJobs } from './gateway/background-jobs.ts'
import { wireCore } from './gateway/core-wiring.ts'
import { wireHttp } from './gateway/http-wiring.ts'
import { closeOnce, shutdownSteps, startUpstreams } from './gateway/lifecycle.ts'
import { settled } from './observability/ignored.ts'

export interface GatewayOptions {
  /** Logger to use instead of one built from `config.logging`. */
  logger?: Logger
  /** Store to use instead of one built from `config.store`. */
  store?: GatewayStore
  /** Reads the configuration again (the file given at start) for POST /admin/reload; without it that route refuses. */
  configSource?: () => Promise<Config>
}

export interface Gateway {
  readonly app: FastifyInstance
  readonly store: GatewayStore
  readonly upstreams: readonly Upstream[]
  readonly catalog: Catalog
  readonly tasks: TaskService
  /** This process among the gateway processes sharing the store (owner of the tasks it runs). */
  readonly processId: string
  /** The Prometheus metrics (served on the admin listener, or by this app with metrics.listener: main); undefined when off. */
  readonly metrics: GatewayMetrics | undefined
  /**
   * The admin API (`admin` configured), never listening: the caller listens on `admin.host`/`admin.port`.
   * Its routes all need the admin token; more can be added with `register…(admin, deps)` before it listens.
   */
  readonly admin: FastifyInstance | undefined
  /**
   * Resolves once every upstream's first connect has ended (up to its `timeouts.connect`) and the lists of
   * those that came up are read; rejects with GW_ERR_CATALOG_COLLISION when their names collide. The gateway
   * serves before that: lists and calls wait for it, `/readyz` names the upstreams still connecting.
   */
  readonly ready: Promise<void>
  /**
   * Puts a new configuration in force without dropping sessions or running tasks (see Reloader): what
   * changed is applied, options read only at start keep their running values and are named in the report.
   */
  reload (config: Config): Promise<ReloadReport>
  /** Stops taking requests, lets in-flight ones finish within `server.shutdownGrace`, then releases everything. */
  close (): Promise<void>
}

/**
 * Wires the whole gateway for a configuration and starts it. It never listens: the caller decides (main.ts, tests).
 * The parts live in src/gateway/: the wiring (core-wiring.ts, http-wiring.ts), the jobs on a timer
 * (background-jobs.ts), what ends with a client session (session-end.ts), and start and shutdown order (lifecycle.ts).
 */
export async function buildGateway (config: Config, options: GatewayOptions = {}): Promise<Gateway> {
  const core = await wireCore(config, { logger: options.logger, store: options.store })
  const ready = startUpstreams(core)
  const front = await wireHttp(core, options.configSource)
  const jobs = gatewayJobs(core)
  const close = closeOnce(shutdownSteps(core, front, jobs), core.log)
  try {
    await startJobs(jobs)
  } catch (err) {
    // The upstreams are already starting: a start that fails here must not leave them (or the store) open.
    // Each step that fails is logged as it fails (closeOnce); the start's own error is the one thrown.
    await settled(close())
    throw err
  }
  const { app, admin, reloader } = front
  const { store, upstreams, catalog, tasks, processId, metrics } = core
  return { app, store, upstreams, catalog, tasks, processId, metrics, admin, ready, reload: (next) => reloader.reload(next), close }
}
