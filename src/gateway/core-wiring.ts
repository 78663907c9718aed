import { randomBytes } from 'node:crypto'
import { OAuthResource } from '../auth/oauth-resource.ts'
import { CallEngine } from '../calls/call-engine.ts'
import { Catalog } from '../catalog/catalog.ts'
import { catalogSync } from '../catalog/catalog-sync.ts'
import { ResourceSubscriptions } from '../catalog/resource-subscriptions.ts'
import { ClientHomes } from '../cluster/client-homes.ts'
import { PeerRequests } from '../cluster/peer-requests.ts'
import { configError } from '../config/load.ts'
import type { Config } from '../config/schema.ts'
import { loadListenerTls, type ListenerTls } from '../http/tls-options.ts'
import { createLogger, type Logger } from '../observability/logger.ts'
import { GatewayMetrics } from '../observability/metrics.ts'
import { RecentProblems } from '../observability/recent-problems.ts'
import { timedStore } from '../store/timed-store.ts'
import { BUS_MAX_AGE_MS, busKey, refusalReporter, withSignedBus } from '../store/signed-bus.ts'
import { GatewayTracing } from '../observability/tracing.ts'
import { announceTaskChanges } from '../admin/task-feed.ts'
import { SessionRequests } from '../protocol/2025-11-25/session-requests.ts'
import { ClientRequestBroker } from '../protocol/2025-11-25/client-requests.ts'
import { InflightRequests } from '../protocol/2025-11-25/inflight-requests.ts'
import { StreamHub } from '../streams/stream-hub.ts'
import { LegacyTaskDelivery } from '../protocol/2025-11-25/task-delivery.ts'
import { ListenHub } from '../protocol/2026-07-28/listen-hub.ts'
import { LiveSettings } from '../reload/live-settings.ts'
import { createStore } from '../store/create-store.ts'
import { openGrantVault, type GrantVault } from '../store/grant-vault.ts'
import type { GatewayStore } from '../store/types.ts'
import { ProcessLease } from '../tasks/process-lease.ts'
import { LostTasks } from '../tasks/lost-tasks.ts'
import { TaskInputs } from '../tasks/task-inputs.ts'
import { TaskRunner } from '../tasks/task-runner.ts'
import { takeoverPolicies } from '../tasks/upstream-task-link.ts'
import { TaskService } from '../tasks/task-service.ts'
import { Upstream } from '../upstream/upstream.ts'
import { type UpstreamEvents } from '../upstream/upstream-events.ts'
import { ClientReach } from './client-reach.ts'
import { SessionEnd } from './session-end.ts'

/** What the gateway is made of behind its endpoints: built by wireCore, started and stopped by the lifecycle. */
export interface GatewayCore {
  /** The configuration the gateway started with: what a reload changes is read through `live` instead. */
  readonly config: Config
  readonly tls: ListenerTls
  readonly log: Logger
  readonly store: GatewayStore
  /** Whether the store was opened here (then the gateway closes it); a store passed in stays open. */
  readonly ownsStore: boolean
  readonly problems: RecentProblems | undefined
  readonly metrics: GatewayMetrics | undefined
  readonly oauth: OAuthResource | undefined
  /** The configuration in force and what requests derive from it (authenticator, limiter): a reload replaces them. */
  readonly live: LiveSettings
  readonly hub: StreamHub
  readonly listen: ListenHub
  readonly processId: string
  readonly tracing: GatewayTracing | undefined
  readonly peers: PeerRequests
  readonly broker: ClientRequestBroker
  readonly homes: ClientHomes
  readonly subscriptions: ResourceSubscriptions
  readonly sync: ReturnType<typeof catalogSync>
  readonly events: UpstreamEvents
  readonly upstreams: Upstream[]
  readonly catalog: Catalog
  /** Aborted once the shutdown grace is over: what still runs is cancelled. */
  readonly shutdown: AbortController
  readonly inflight: InflightRequests
  readonly delivery: LegacyTaskDelivery
  readonly inputs: TaskInputs
  readonly calls: CallEngine
  readonly runner: TaskRunner
  readonly tasks: TaskService
  readonly lease: ProcessLease
  readonly sessionEnd: SessionEnd
  /** Bus subscriptions to end at shutdown, before the store closes. */
  readonly unsubscribes: ReadonlyArray<() => void>
}

/** Builds the parts behind the endpoints for a configuration. Nothing is started here. */
export async function wireCore (config: Config, given: { logger?: Logger, store?: GatewayStore }): Promise<GatewayCore> {
  // First: a certificate that cannot be used stops the start before anything is opened.
  const tls = await loadListenerTls(config)
  const log = given.logger ?? createLogger(config.logging)
  // Processes sharing a store trust only the messages they can verify: without a common secret they could not.
  if (given.store?.shared === true && config.server.stateSecret === undefined) {
    throw configError('configuration', [{ path: 'server.stateSecret', message: 'is required with a store several gateway processes share' }])
  }
  const backend = given.store ?? await createStore(config.store, log)
  const upstreams: Upstream[] = []
  const problems = config.admin === undefined ? undefined : new RecentProblems()
  // Collected only where they are served: metrics.listener admin needs the admin listener.
  const metrics: GatewayMetrics | undefined = config.metrics.enabled && (config.metrics.listener === 'main' || config.admin !== undefined)
    ? new GatewayMetrics(backend.kind, {
      upstreams,
      streams: () => hub.size,
      running: (taskId: string): boolean => runner.has(taskId),
      runningCount: (): number => runner.size,
      storeReady: async (): Promise<boolean> => (await backend.health()).ok,
    }, problems)
    : undefined
  // On a shared store every message between processes is signed, and one that cannot be verified is refused.
  const signed = !backend.shared
    ? backend
    : withSignedBus(backend, {
      key: busKey(config.server.stateSecret ?? ''),
      maxAgeMs: 'messageMaxAge' in config.store ? config.store.messageMaxAge : BUS_MAX_AGE_MS,
      refused: refusalReporter(log, (reason, channel) => metrics?.busRefused(reason, channel)),
    })
  const store: GatewayStore = metrics === undefined ? signed : timedStore(signed, metrics)
  const oauth = config.auth.oauth === undefined ? undefined : new OAuthResource(config.auth.oauth, log)
  // What requests read of the configuration, which a reload replaces.
  let vault: GrantVault | undefined
  const grants = (): GrantVault => (vault ??= openGrantVault(store, config.server.stateSecret, { log }))
  const live = new LiveSettings(config, { oauth, rateLimits: store.rateLimits, log, grants })
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
  const peers = new PeerRequests(processId, store.bus, store.leases, log)
  const broker = new ClientRequestBroker(peers)
  // An upstream's request tied to no call: to the session's GET stream, or the next one it opens.
  const sessionRequests = new SessionRequests(hub, store.bus, log)
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
  const reach = new ClientReach({ hub, listen, bus: store.bus, sessionRequests, broker, log })
  const subscriptions = new ResourceSubscriptions(log, (subscriber, message) => { reach.deliver(subscriber, message) })
  const sync = catalogSync({
    catalog: () => catalog,
    subscriptions,
    log,
    broadcast: (message, everywhere) => { reach.broadcast(message, everywhere) },
    notifyClient: (clientKey, message) => { reach.notifyClient(clientKey, message) },
    askClient: async (clientKey, method, params, signal) => await reach.askClient(clientKey, method, params, signal),
  })
  const events: UpstreamEvents = {
    ...sync,
    onSessionClosed: (upstream, session) => {
      sync.onSessionClosed(upstream, session)
      homes.sessionClosed(session.key)
    },
  }
  for (const upstream of config.upstreams) upstreams.push(new Upstream(upstream, log, events, live.credentialSources))
  const catalog = new Catalog(upstreams, log, (change) => sync.changed(change))

  const shutdown = new AbortController()
  const inflight = new InflightRequests(shutdown.signal, store.bus)
  const delivery = new LegacyTaskDelivery(hub, store.bus, store.tasks, log)
  hub.onGetStream = (sessionId) => delivery.onGetStream(sessionId)
  hub.onRequestSent = (request, stream) => delivery.offeredOn(request, stream)
  // With the admin API, task changes are also announced to the dashboards of every process sharing the store.
  const taskEvents = config.admin === undefined ? delivery : announceTaskChanges(delivery, store.bus, log)
  const inputs = new TaskInputs({
    store: store.tasks,
    events: taskEvents,
    config: live.tasks,
    bus: store.bus,
    processId,
    budget: live.budget,
    log,
  })
  const calls = new CallEngine(metrics)
  const runner = new TaskRunner({
    store: store.tasks,
    upstreams: catalog,
    calls,
    inputs,
    events: taskEvents,
    log,
    shutdown: shutdown.signal,
    bus: store.bus,
    nativeTaskSupport: (upstream, tool) => catalog.nativeTaskSupport(upstream, tool),
    get listing () { return catalog.starting },
    get maxResultBytes () { return live.tasks.maxResultBytes },
    get storedBytesPerPrincipal () { return live.budget.storedBytesPerPrincipal },
    tracing,
  })
  // Read from the store itself: the wrappers above (signed bus, timings) do not carry it.
  const lost = new LostTasks({ watch: backend.dataLoss, running: () => runner.tasks(), events: taskEvents, bus: store.bus, log })
  const tasks = new TaskService({
    store: store.tasks,
    runner,
    inputs,
    events: taskEvents,
    config: live.tasks,
    log,
    bus: store.bus,
    owner: processId,
    ...takeoverPolicies(catalog),
    get storedBytesPerPrincipal () { return live.budget.storedBytesPerPrincipal },
    lost,
  })
  const lease = new ProcessLease({
    processId,
    leases: store.leases,
    bus: store.bus,
    tasks,
    store: store.tasks,
    runner,
    shared: store.shared,
    leaseMs: config.tasks.ownerLease,
    log,
    onTakeover: (taken) => metrics?.failovers(taken),
  })
  const sessionEnd = new SessionEnd({ bus: store.bus, upstreams, hub, subscriptions, tasks, log })
  const unsubscribes = [reach.listen(), sessionEnd.listen()]

  return {
    config,
    tls,
    log,
    store,
    ownsStore: given.store === undefined,
    problems,
    metrics,
    oauth,
    live,
    hub,
    listen,
    processId,
    tracing,
    peers,
    broker,
    homes,
    subscriptions,
    sync,
    events,
    upstreams,
    catalog,
    shutdown,
    inflight,
    delivery,
    inputs,
    calls,
    runner,
    tasks,
    lease,
    sessionEnd,
    unsubscribes,
  }
}
