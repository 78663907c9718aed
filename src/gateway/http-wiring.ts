import type { Server as HttpServer } from 'node:http'
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import { createAdmin } from '../admin/admin-routes.ts'
import { HeldCalls } from '../calls/held-calls.ts'
import { forwardedAuthorizationKey, HomeRouting } from '../cluster/home-routing.ts'
import type { Config, ServerConfig } from '../config/schema.ts'
import type { MethodTable } from '../dispatch/context.ts'
import { homeMethods, methodTable, type MethodRegistry } from '../dispatch/method-registry.ts'
import { sharedMethods } from '../dispatch/method-table.ts'
import { serverFeatures, serverProfile, type ServerProfile } from '../catalog/server-profile.ts'
import { registerCors } from '../http/cors.ts'
import { guardConnections } from '../http/connection-guard.ts'
import { registerHealthRoutes } from '../http/health-routes.ts'
import { upstreamSurvival } from '../tasks/survival.ts'
import { registerHostOriginGuard } from '../http/host-origin-guard.ts'
import { registerMcpRoute } from '../http/mcp-route.ts'
import { registerMetricsRoute } from '../observability/metrics-route.ts'
import { accessLog, PROBE_PATHS } from '../observability/access-log.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import { LegacyEndpoint, touchInterval } from '../protocol/2025-11-25/endpoint.ts'
import { legacyMethods } from '../protocol/2025-11-25/methods.ts'
import { ModernEndpoint } from '../protocol/2026-07-28/endpoint.ts'
import { modernMethods } from '../protocol/2026-07-28/methods.ts'
import { modernPromptsGet, modernToolsCall } from '../protocol/2026-07-28/tools-call.ts'
import { RequestStateCodec } from '../protocol/2026-07-28/request-state.ts'
import { RetryRouter } from '../protocol/2026-07-28/retry-router.ts'
import { Reloader, type ReloadReport } from '../reload/reloader.ts'
import type { GatewayCore } from './core-wiring.ts'
import type { Upstream } from '../upstream/upstream.ts'

/** The gateway's front: its endpoints, the Fastify app serving them and the admin API. Neither listens. */
export interface GatewayFront {
  readonly app: FastifyInstance
  readonly admin: FastifyInstance | undefined
  readonly reloader: Reloader
  /** 2026-07-28 calls waiting for the client's retry with its answers. */
  readonly held: HeldCalls
  /** Stops taking requests: `/readyz` says so and new MCP requests are refused; those in flight go on. */
  drain (): void
}

/** `server.trustProxy` as Fastify takes it: a number of trusted hops becomes a test by hop index. */
function trustedProxies (trust: ServerConfig['trustProxy']): boolean | string[] | ((address: string, hop: number) => boolean) {
  return typeof trust === 'number' ? (_address, hop) => hop < trust : trust
}

const NONE_WITHHELD: readonly string[] = Object.freeze([])

/**
 * The upstreams a principal has no credential for (upstreams[].credentials). Asked on every authenticated request:
 * no array is made unless one is withheld.
 */
function withheldFrom (upstreams: readonly Upstream[], principal: string): readonly string[] {
  let names: string[] | undefined
  for (const upstream of upstreams) {
    if (upstream.credentials?.refusal?.({ principal }) !== undefined) (names ??= []).push(upstream.name)
  }
  return names ?? NONE_WITHHELD
}

/** What the endpoints and apps are built over. */
export type HttpParts = Pick<GatewayCore,
  'config' | 'tls' | 'log' | 'store' | 'live' | 'hub' | 'listen' | 'processId' | 'tracing' | 'peers' | 'broker' | 'homes' |
  'subscriptions' | 'sync' | 'events' | 'upstreams' | 'catalog' | 'shutdown' | 'inflight' | 'delivery' | 'inputs' | 'calls' |
  'tasks' | 'metrics' | 'problems' | 'oauth' | 'sessionEnd'>

/** Builds the endpoints of both protocol eras over the core, and the HTTP apps that serve them. */
export async function wireHttp (core: HttpParts, configSource: (() => Promise<Config>) | undefined): Promise<GatewayFront> {
  const { config, tls, log, store, live, hub, listen, processId, tracing, peers, broker, homes, subscriptions, sync, events } = core
  const { upstreams, catalog, shutdown, inflight, delivery, inputs, calls, tasks, metrics, problems, oauth, sessionEnd } = core
  let closing = false
  const authorizationKey = config.server.stateSecret === undefined ? undefined : forwardedAuthorizationKey(config.server.stateSecret)
  const routing = new HomeRouting({ homes, peers, access: (key) => live.access(key === '' ? [] : key.split(' ')), log, tracing, authorizationKey })
  const shared = sharedMethods({ catalog, subscriptions, pageSize: config.server.pageSize, upstreams })
  // What the upstreams offer, as far as known once each one's first connect has ended (a reload changes them).
  const profile = async (): Promise<ServerProfile> => {
    await catalog.starting
    return serverProfile(upstreams, live.config.server.instructions)
  }
  // A revision's table; with one process per store every client's home is this process: nothing is routed.
  const methods = (name: string, registry: MethodRegistry): MethodTable => {
    const table = methodTable(registry, async () => {
      await catalog.starting
      return serverFeatures(upstreams)
    })
    return store.shared ? routing.route(name, table, homeMethods(registry)) : table
  }
  const held = new HeldCalls(config.server.inputHoldTimeout, hub.exchanges)
  const states = new RequestStateCodec(config.server.stateSecret, config.server.inputHoldTimeout)
  const retries = new RetryRouter({ processId, states, peers, log })
  const modern = new ModernEndpoint({
    hub,
    problems: metrics && problems,
    toolSchema: (name, access, client) => {
      try {
        return catalog.peek(client).tool(name, access).entry?.inputSchema as JsonObject | undefined
      } catch {
        return undefined
      }
    },
    log,
    shutdown: shutdown.signal,
    methods: methods('modern', modernMethods({
      shared,
      catalog,
      promptsGet: modernPromptsGet({ catalog, calls, held, retries }),
      toolsCall: modernToolsCall({ catalog, calls, held, retries, tasks, inputs, config: live.tasks }),
      listen,
      subscriptions,
      bus: store.bus,
      store: store.tasks,
      tasks,
      inputs,
      listTtlMs: config.server.listCacheTtl,
      profile,
    })),
  })
  const legacy = new LegacyEndpoint({
    store,
    problems: metrics && problems,
    hub,
    broker,
    inflight,
    methods: methods('legacy', legacyMethods({ shared, catalog, calls, tasks, delivery, bus: store.bus, pageSize: config.server.pageSize })),
    profile,
    answerInput: (principal, response) => inputs.answer(principal, response),
    log,
    shutdown: shutdown.signal,
    get sessionsPerPrincipal () { return live.config.limits.sessionsPerPrincipal },
    get clientInfoBytes () { return live.config.limits.clientInfoBytes },
    get storedBytesPerPrincipal () { return live.config.limits.storedBytesPerPrincipal },
    touchIntervalMs: touchInterval(config.server.sessionIdleTimeout),
    onSessionClosed: (sessionId) => { sessionEnd.closed(sessionId) },
    onClientNotification: (clientKey, method, params) => { sessionEnd.relayNotification(clientKey, method, params) },
  })

  // How often the two timeouts below are checked (Node's default, 30 s, would let a slow client hold on far longer).
  const connectionsCheckingInterval = Math.min(1000, config.limits.headersTimeout)
  const metricsOn = (listener: 'main' | 'admin'): string[] => config.metrics.enabled && config.metrics.listener === listener ? [config.metrics.path] : []
  const fastifyOptions = {
    loggerInstance: log as FastifyBaseLogger,
    logController: accessLog(config.logging.probes, [...PROBE_PATHS, ...metricsOn('main')]),
    bodyLimit: config.server.maxBodyBytes,
    requestIdHeader: 'x-request-id',
    forceCloseConnections: true,
    trustProxy: trustedProxies(config.server.trustProxy),
    // Slow clients: the whole request (headers and body) must arrive in time; responses are not bounded by it.
    requestTimeout: Math.max(config.limits.requestTimeout, config.limits.headersTimeout),
    keepAliveTimeout: config.limits.keepAliveTimeout,
  }
  // With server.tls the listener is HTTPS. An HTTPS server hands out the same request and response objects as
  // an HTTP one (and has the same timeouts), so the app is typed as the HTTP one everything else expects.
  // A TLS client that never finishes its handshake is closed after headersTimeout too (Node's default is 120 s).
  const handshakeTimeout = config.limits.headersTimeout
  const app: FastifyInstance = tls.server === undefined
    ? Fastify({ ...fastifyOptions, http: { connectionsCheckingInterval } })
    : Fastify({ ...fastifyOptions, https: { ...tls.server, connectionsCheckingInterval, handshakeTimeout } }) as unknown as FastifyInstance
  const server = app.server as HttpServer
  server.headersTimeout = config.limits.headersTimeout
  server.maxConnections = config.limits.maxConnections
  const { connectionsPerIp, headersTimeout } = config.limits
  guardConnections(server, { perAddress: connectionsPerIp, firstRequestMs: headersTimeout, tls: tls.server !== undefined, log })
  registerHostOriginGuard(app, config.server)
  await registerCors(app, config.server)
  registerHealthRoutes(app, store, upstreams, () => closing, () => core.tasks.handedOver)
  oauth?.register(app)
  await registerMcpRoute(app, {
    config: config.server,
    legacy,
    modern,
    get authenticator () { return live.authenticator },
    get passAuthorization () { return live.passAuthorization },
    get limiter () { return live.limiter },
    withheld: (principal) => withheldFrom(upstreams, principal),
    isClosing: () => closing,
    metrics,
    tracing,
    problems: metrics && problems,
  })
  if (metrics !== undefined && config.metrics.listener === 'main') registerMetricsRoute(app, metrics, config.metrics.path)

  const reloader = new Reloader({ live, upstreams, catalog, events, listsChanged: sync.listsChanged, exchanges: hub.exchanges, log })
  const reload = (next: Config): Promise<ReloadReport> => reloader.reload(next)
  const admin = createAdmin(config.admin, log, {
    store,
    upstreams,
    leaving: () => reloader.leaving(),
    tasks,
    processId,
    problems: metrics && problems,
    drain: () => { closing = true },
    reload: { source: configSource, apply: reload },
    survival: () => upstreams.map((upstream) => upstreamSurvival(upstream, core.catalog.nativeTools(upstream.name))),
  }, tls.admin, accessLog(config.logging.probes, metricsOn('admin')))
  if (metrics !== undefined && config.metrics.listener === 'admin' && admin !== undefined) registerMetricsRoute(admin, metrics, config.metrics.path)

  return { app, admin, reloader, held, drain: () => { closing = true } }
}
