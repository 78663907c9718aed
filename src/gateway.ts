import { randomBytes } from 'node:crypto'
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import { CallEngine } from './calls/call-engine.ts'
import { Catalog } from './catalog/catalog.ts'
import { describeCollisions } from './catalog/catalog-view.ts'
import { catalogSync } from './catalog/catalog-sync.ts'
import { ResourceSubscriptions } from './catalog/resource-subscriptions.ts'
import type { Server as HttpServer } from 'node:http'
import type { Config, ServerConfig } from './config/schema.ts'
import { buildMethodTable } from './dispatch/method-table.ts'
import type { MethodTable } from './dispatch/context.ts'
import { GatewayError } from './errors.ts'
import { registerCors } from './http/cors.ts'
import { registerHealthRoutes } from './http/health-routes.ts'
import { registerHostOriginGuard } from './http/host-origin-guard.ts'
import { registerMcpRoute } from './http/mcp-route.ts'
import { loadListenerTls } from './http/tls-options.ts'
import { createLogger, type Logger } from './observability/logger.ts'
import { ClientRequestBroker } from './protocol/legacy/client-requests.ts'
import { InflightRequests } from './protocol/legacy/inflight-requests.ts'
import { LegacyEndpoint, touchInterval } from './protocol/legacy/legacy-endpoint.ts'
import { StreamHub } from './streams/stream-hub.ts'
import { createStore } from './store/create-store.ts'
import type { GatewayStore } from './store/types.ts'
import { Upstream, type UpstreamEvents } from './upstream/upstream.ts'
import { sessionClientKey, sessionIdOf } from './upstream/client-ref.ts'
import type { JsonObject, RpcNotification } from './wire/jsonrpc.ts'
import { OAuthResource } from './auth/oauth-resource.ts'
import { LegacyTaskDelivery } from './protocol/legacy/task-delivery.ts'
import { withLegacyTaskMethods } from './protocol/legacy/task-methods.ts'
import { TaskInputs } from './tasks/task-inputs.ts'
import { TaskRunner } from './tasks/task-runner.ts'
import { TaskService } from './tasks/task-service.ts'
import { ProcessLease } from './tasks/process-lease.ts'
import { PeerRequests } from './cluster/peer-requests.ts'
import { ClientHomes } from './cluster/client-homes.ts'
import { HomeRouting } from './cluster/home-routing.ts'
import { HeldCalls } from './calls/held-calls.ts'
import { ListenHub } from './protocol/modern/listen-hub.ts'
import { ModernEndpoint } from './protocol/modern/modern-endpoint.ts'
import { buildModernMethods } from './protocol/modern/modern-methods.ts'
import { modernPromptsGet, modernToolsCall } from './protocol/modern/modern-tools-call.ts'
import { RequestStateCodec } from './protocol/modern/request-state.ts'
import { RetryRouter } from './protocol/modern/retry-router.ts'
import { createAdmin } from './admin/admin-routes.ts'
import { announceTaskChanges } from './admin/task-feed.ts'
import { RecentProblems } from './observability/recent-problems.ts'
import { GatewayMetrics } from './observability/metrics.ts'
import { registerMetricsRoute } from './observability/metrics-route.ts'
import { timedStore } from './store/timed-store.ts'
import { LiveSettings } from './reload/live-settings.ts'
import { Reloader, type ReloadReport } from './reload/reloader.ts'
import { GatewayTracing } from './observability/tracing.ts'

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

/** Where a change of the lists every client starts from is announced to every gateway process. */
const LIST_CHANGED_CHANNEL = 'catalog:list-changed'
/** Where the end of a client, and its notifications for its upstream sessions, reach the process holding them. */
const CLIENT_CHANNEL = 'upstream:clients'

/** `server.trustProxy` as Fastify takes it: a number of trusted hops becomes a test by hop index. */
function trustedProxies (trust: ServerConfig['trustProxy']): boolean | string[] | ((address: string, hop: number) => boolean) {
  return typeof trust === 'number' ? (_address, hop) => hop < trust : trust
}

/** Wires the whole gateway for a configuration. It never listens: the caller decides (main.ts, tests). */
export async function buildGateway (config: Config, options: GatewayOptions = {}): Promise<Gateway> {
  // First: a certificate that cannot be used stops the start before anything is opened.
  const tls = await loadListenerTls(config)
  const log = options.logger ?? createLogger(config.logging)
  const backend = options.store ?? await createStore(config.store, log)
  const upstreams: Upstream[] = []
  const problems = config.admin === undefined ? undefined : new RecentProblems()
  // Collected only where they are served: metrics.listener admin needs the admin listener.
  const metrics: GatewayMetrics | undefined = config.metrics.enabled && (config.metrics.listener === 'main' || config.admin !== undefined)
    ? new GatewayMetrics(backend.kind, {
      upstreams,
      streams: () => hub.size,
      running: (taskId: string): boolean => runner.has(taskId),
      runningCount: (): number => runner.size,
    }, problems)
    : undefined
  const store: GatewayStore = metrics === undefined ? backend : timedStore(backend, metrics)
  const oauth = config.auth.oauth === undefined ? undefined : new OAuthResource(config.auth.oauth, log)
  // What requests read of the configuration, which a reload replaces.
  const live = new LiveSettings(config, { oauth, rateLimits: store.rateLimits, log })
  const hub = new StreamHub(store.bus, {
    log,
    keepAliveMs: config.server.sseKeepAlive,
    streamsPerSession: config.limits.streamsPerSession,
    stallTimeoutMs: config.limits.streamStallTimeout,
    bufferBytes: config.limits.streamBufferBytes,
  })
  const listen = new ListenHub()
  // Opaque (it appears in ids clients see); the startup log line pairs it with the host and pid.
  const processId = randomBytes(12).toString('base64url')
  // Decided once: with tracing off nothing below makes or checks a span.
  const tracing = config.tracing.enabled ? new GatewayTracing(config.tracing, processId) : undefined
  const peers = new PeerRequests(processId, store.bus, store.leases)
  const broker = new ClientRequestBroker(peers)
  /** Whether this process holds upstream sessions of the client (then it is, and stays, its home). */
  const holdsSessions = (clientKey: string): boolean => upstreams.some((upstream) => upstream.sessionByKey(clientKey) !== undefined)
  const homes = new ClientHomes({
    processId,
    homes: store.homes,
    shared: store.shared,
    ttlMs: 3 * config.tasks.ownerLease,
    holdsSessions,
    log,
  })
  const subscriptions = new ResourceSubscriptions(log, (subscriber, message) => {
    if (subscriber.startsWith('listen:')) listen.deliver(subscriber, message)
    else void hub.publish(subscriber, message)
  })
  const broadcastLocal = (message: RpcNotification): void => {
    hub.broadcastLocal(message)
    listen.listChanged(message.method)
  }
  const unsubscribeBroadcasts = store.bus.subscribe(LIST_CHANGED_CHANNEL, ({ method }) => {
    if (typeof method === 'string') broadcastLocal({ jsonrpc: '2.0', method })
  })
  // A client's upstream sessions live on its home process: what concerns them is announced to all.
  const unsubscribeClients = store.bus.subscribe(CLIENT_CHANNEL, ({ type, clientKey, method, params }) => {
    if (typeof clientKey !== 'string') return
    for (const upstream of upstreams) {
      if (type === 'ended') upstream.endClient(clientKey)
      else if (type === 'notify' && typeof method === 'string') void upstream.sessionByKey(clientKey)?.notify(method, (params ?? {}) as JsonObject).catch(() => {})
    }
  })
  const sync = catalogSync({
    catalog: () => catalog,
    subscriptions,
    log,
    broadcast: (message, everywhere) => {
      if (everywhere) void store.bus.publish(LIST_CHANGED_CHANNEL, { method: message.method }).catch(() => broadcastLocal(message))
      else broadcastLocal(message)
    },
    notifyClient: (clientKey, message) => {
      const sessionId = sessionIdOf(clientKey)
      if (sessionId !== undefined) void hub.publish(sessionId, message).catch(() => {})
      else listen.listChangedFor(clientKey, message.method)
    },
    askClient: async (clientKey, method, params, signal) => {
      const sessionId = sessionIdOf(clientKey)
      if (sessionId === undefined) throw new GatewayError('GW_ERR_CLIENT_UNREACHABLE', [method, 'a 2026-07-28 client can only be asked during a call'])
      return await broker.send(sessionId, (message) => { void hub.publish(sessionId, message).catch(() => {}) }, method, params, signal)
    },
  })
  const events: UpstreamEvents = {
    ...sync,
    onSessionClosed: (upstream, session) => {
      sync.onSessionClosed(upstream, session)
      if (!holdsSessions(session.key)) void homes.release(session.key)
    },
  }
  for (const upstream of config.upstreams) upstreams.push(new Upstream(upstream, log, events))
  const catalog = new Catalog(upstreams, log, (change) => sync.changed(change))

  const releaseAll = async (): Promise<void> => {
    unsubscribeBroadcasts()
    unsubscribeClients()
    await Promise.all(upstreams.map((upstream) => upstream.close()))
    if (!options.store) await store.close()
  }

  // Upstreams connect in the background: the gateway can listen (and answer /healthz) at once.
  sync.started()
  for (const upstream of upstreams) void upstream.start()
  const ready = catalog.start().then((startView) => {
    if (startView.collisions.length > 0) throw new GatewayError('GW_ERR_CATALOG_COLLISION', [describeCollisions(startView.collisions)])
  })
  ready.catch(() => {})

  const shutdown = new AbortController()
  const inflight = new InflightRequests(shutdown.signal, store.bus)
  let closing = false
  const delivery = new LegacyTaskDelivery(hub, store.bus, store.tasks)
  hub.onGetStream = (sessionId) => delivery.onGetStream(sessionId)
  // With the admin API, task changes are also announced to the dashboards of every process sharing the store.
  const taskEvents = config.admin === undefined ? delivery : announceTaskChanges(delivery, store.bus)
  const inputs = new TaskInputs(store.tasks, taskEvents, live.tasks, store.bus, processId)
  const calls = new CallEngine(metrics)
  const runner = new TaskRunner({ store: store.tasks, upstreams: { get: (name) => upstreams.find((u) => u.name === name) }, calls, inputs, events: taskEvents, log, shutdown: shutdown.signal, bus: store.bus, isNativeTask: (upstream, tool) => catalog.isNativeTask(upstream, tool), get maxResultBytes () { return live.tasks.maxResultBytes }, tracing })
  const tasks = new TaskService({
    store: store.tasks,
    runner,
    inputs,
    events: taskEvents,
    config: live.tasks,
    log,
    bus: store.bus,
    owner: processId,
    isIdempotent: (task) => upstreams.find((u) => u.name === task.upstream)?.config.toolSettings[task.tool]?.idempotent === true,
  })
  const lease = new ProcessLease({ processId, leases: store.leases, tasks, shared: store.shared, leaseMs: config.tasks.ownerLease, log, onTakeover: (taken) => metrics?.failovers(taken) })
  await lease.start()
  /** What a session held dies with it; with auth off that includes its tasks, which nobody else can reach. */
  const endSession = async (sessionId: string): Promise<void> => {
    await store.bus.publish(CLIENT_CHANNEL, { type: 'ended', clientKey: sessionClientKey(sessionId) })
    await subscriptions.dropSubscriber(sessionId)
    const cancelled = await tasks.cancelAllOf(`anonymous:${sessionId}`)
    if (cancelled > 0) log.info({ sessionId, cancelled }, 'cancelled the tasks of an ended anonymous session')
  }
  const routing = new HomeRouting({ homes, peers, access: (key) => live.access(key === '' ? [] : key.split(' ')), log, tracing })
  // With one process per store every client's home is this process: nothing is routed.
  const routed = (name: string, table: MethodTable): MethodTable => store.shared ? routing.route(name, table) : table
  const base = buildMethodTable({ catalog, subscriptions, pageSize: config.server.pageSize })
  const held = new HeldCalls(config.server.inputHoldTimeout)
  const retries = new RetryRouter({ processId, states: new RequestStateCodec(config.server.stateSecret, config.server.inputHoldTimeout), peers, log })
  const modern = new ModernEndpoint({
    hub,
    toolSchema: (name, access, client) => {
      try {
        return catalog.peek(client).tool(name, access).entry?.inputSchema as JsonObject | undefined
      } catch {
        return undefined
      }
    },
    log,
    shutdown: shutdown.signal,
    methods: routed('modern', buildModernMethods(base, {
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
    })),
  })
  const legacy = new LegacyEndpoint({
    store,
    hub,
    broker,
    inflight,
    methods: routed('legacy', withLegacyTaskMethods(base, { catalog, calls, tasks, delivery, bus: store.bus, pageSize: config.server.pageSize })),
    answerInput: (principal, response) => inputs.answer(principal, response),
    log,
    shutdown: shutdown.signal,
    get sessionsPerPrincipal () { return live.config.limits.sessionsPerPrincipal },
    touchIntervalMs: touchInterval(config.server.sessionIdleTimeout),
    onSessionClosed: (sessionId) => { endSession(sessionId).catch((err: unknown) => log.warn({ err, sessionId }, 'could not release what an ended session held')) },
    onClientNotification: (clientKey, method, params) => {
      void store.bus.publish(CLIENT_CHANNEL, { type: 'notify', clientKey, method, params }).catch(() => {})
    },
  })

  // How often the two timeouts below are checked (Node's default, 30 s, would let a slow client hold on far longer).
  const connectionsCheckingInterval = Math.min(1000, config.limits.headersTimeout)
  const fastifyOptions = {
    loggerInstance: log as FastifyBaseLogger,
    bodyLimit: config.server.maxBodyBytes,
    requestIdHeader: 'x-request-id',
    forceCloseConnections: true,
    trustProxy: trustedProxies(config.server.trustProxy),
    // Slow clients: the whole request (headers and body) must arrive in time; responses are not bounded by it.
    requestTimeout: Math.max(config.limits.requestTimeout, config.limits.headersTimeout),
  }
  // With server.tls the listener is HTTPS. An HTTPS server hands out the same request and response objects as
  // an HTTP one (and has the same timeouts), so the app is typed as the HTTP one everything else expects.
  const app: FastifyInstance = tls.server === undefined
    ? Fastify({ ...fastifyOptions, http: { connectionsCheckingInterval } })
    : Fastify({ ...fastifyOptions, https: { ...tls.server, connectionsCheckingInterval } }) as unknown as FastifyInstance
  const server = app.server as HttpServer
  server.headersTimeout = config.limits.headersTimeout
  server.maxConnections = config.limits.maxConnections
  registerHostOriginGuard(app, config.server)
  await registerCors(app, config.server)
  registerHealthRoutes(app, store, upstreams, () => closing)
  oauth?.register(app)
  await registerMcpRoute(app, {
    config: config.server,
    legacy,
    modern,
    get authenticator () { return live.authenticator },
    get passAuthorization () { return live.passAuthorization },
    get limiter () { return live.limiter },
    isClosing: () => closing,
    metrics,
    tracing,
  })
  if (metrics !== undefined && config.metrics.listener === 'main') registerMetricsRoute(app, metrics, config.metrics.path)

  const reloader = new Reloader({ live, upstreams, catalog, events, listsChanged: sync.listsChanged, log })
  const reload = (next: Config): Promise<ReloadReport> => reloader.reload(next)
  const admin = createAdmin(config.admin, log, { store, upstreams, leaving: () => reloader.leaving(), tasks, processId, problems: metrics && problems, drain: () => { closing = true }, reload: { source: options.configSource, apply: reload } }, tls.admin)
  if (metrics !== undefined && config.metrics.listener === 'admin' && admin !== undefined) registerMetricsRoute(admin, metrics, config.metrics.path)

  const sweepEvery = Math.min(60_000, Math.max(1000, Math.floor(config.server.sessionIdleTimeout / 4)))
  const sweeper = setInterval(() => {
    store.sessions.sweep(Date.now() - config.server.sessionIdleTimeout).then((ids) => {
      for (const id of ids) {
        hub.closeSession(id)
        endSession(id).catch((err: unknown) => log.warn({ err, sessionId: id }, 'could not release what an expired session held'))
      }
      if (ids.length > 0) log.info({ count: ids.length }, 'expired idle sessions')
    }, (err: unknown) => log.warn({ err }, 'session sweep failed'))
  }, sweepEvery)
  sweeper.unref()
  const taskSweeper = setInterval(() => {
    tasks.sweep().then((count) => {
      if (count > 0) log.info({ count }, 'deleted expired tasks')
    }, (err: unknown) => log.warn({ err }, 'task sweep failed'))
  }, config.tasks.sweepInterval)
  taskSweeper.unref()

  let closed: Promise<void> | undefined
  const close = (): Promise<void> => {
    closed ??= (async () => {
      closing = true
      clearInterval(sweeper)
      clearInterval(taskSweeper)
      const deadline = Date.now() + live.config.server.shutdownGrace
      const busy = (): number => inflight.size + runner.size
      while (busy() > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 25))
      if (busy() > 0) log.warn({ requests: inflight.size, tasks: runner.size }, 'shutdown grace over: cancelling in-flight requests and tasks')
      shutdown.abort(new GatewayError('GW_ERR_SHUTTING_DOWN'))
      held.close(new GatewayError('GW_ERR_SHUTTING_DOWN'))
      await runner.settled()
      await lease.stop()
      await homes.close()
      peers.close()
      await new Promise((resolve) => setImmediate(resolve))
      hub.closeAll()
      await app.close()
      await admin?.close()
      await reloader.close()
      await releaseAll()
      await tracing?.close()
    })()
    return closed
  }

  return { app, store, upstreams, catalog, tasks, processId, metrics, admin, ready, reload, close }
}
