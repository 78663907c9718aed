import { randomBytes } from 'node:crypto'
import type { Catalog } from '../../catalog/catalog.ts'
import type { ResourceSubscriptions } from '../../catalog/resource-subscriptions.ts'
import type { ServerProfile } from '../../catalog/server-profile.ts'
import type { Handler, MethodTable, RequestContext } from '../../dispatch/context.ts'
import { optionalObject } from '../../wire/params.ts'
import { BUS, subscribeTo } from '../../store/bus-channels.ts'
import type { SignalBus, TaskStore } from '../../store/types.ts'
import type { TaskService } from '../../tasks/task-service.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'
import { GATEWAY_INFO } from '../../wire/versions.ts'
import { declaresTasks, MODERN_PROTOCOL_VERSIONS, SERVER_INFO_KEY, TASKS_EXTENSION, tasksCapabilityRequired } from './envelope.ts'
import { onSubscription, type ListenFilter, type ListenHub } from './listen-hub.ts'
import { modernTaskMethods, type ModernTaskMethodDeps } from './task-methods.ts'
import { renderDetailedTask, renderLostTask } from './task-wire.ts'
import { ignoreWithTrace } from '../../observability/ignored.ts'
import { GatewayError } from '../../errors.ts'

export interface ModernMethodDeps extends ModernTaskMethodDeps {
  catalog: Catalog
  toolsCall: Handler
  promptsGet: Handler
  listen: ListenHub
  subscriptions: ResourceSubscriptions
  bus: SignalBus
  store: TaskStore
  tasks: TaskService
  /** How long clients may cache list results (the 2026-07-28 caching hints). */
  listTtlMs: number
  /** What server/discover announces: the upstreams' capabilities and instructions (see ServerProfile). */
  profile (): Promise<ServerProfile>
}

function flag (filter: JsonObject, key: string): boolean {
  return filter[key] === true
}

function strings (filter: JsonObject, key: string): string[] {
  const value = filter[key]
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []
}

/**
 * Sends a listen stream the current DetailedTask of a task, in order (each read after the previous one was
 * sent) and once per distinct state, so a late read never overtakes a newer one.
 */
function taskNotifier (deps: ModernMethodDeps, ctx: RequestContext): (taskId: string) => void {
  let queue = Promise.resolve()
  const lastSent = new Map<string, string>()
  const notify = async (taskId: string): Promise<void> => {
    const task = await deps.tasks.get(ctx.client.principal, taskId).catch((err: unknown) => {
      // A task the store lost is shown failed with why, once, in the shape last sent.
      const last = lastSent.get(taskId)
      if (!(err instanceof GatewayError) || err.code !== 'GW_ERR_TASK_LOST_BY_STORE' || last === undefined) return undefined
      lastSent.delete(taskId)
      ctx.send(onSubscription(ctx.requestId, 'notifications/tasks', renderLostTask(JSON.parse(last) as JsonObject, err)))
      return undefined
    })
    if (!task) return
    const pending = task.status === 'input_required' ? await deps.store.pendingInputs(task.id) : []
    const params = renderDetailedTask(task, pending)
    const text = JSON.stringify(params)
    if (lastSent.get(taskId) === text) return
    lastSent.set(taskId, text)
    ctx.send(onSubscription(ctx.requestId, 'notifications/tasks', params))
  }
  return (taskId) => {
    queue = queue.then(() => notify(taskId)).catch(ignoreWithTrace(ctx.log, 'a task change was not sent on a listen stream; the next change of the task sends its state', { taskId }))
  }
}

/** The method table of the modern era: the shared methods plus discovery, listen and the tasks extension. */
export function buildModernMethods (base: MethodTable, deps: ModernMethodDeps): MethodTable {
  const table = new Map(base)
  // Methods the 2026-07-28 protocol no longer has (HTTP 404 with -32601).
  for (const method of ['resources/subscribe', 'resources/unsubscribe', 'ping', 'logging/setLevel']) table.delete(method)

  table.set('server/discover', async () => {
    const { capabilities, instructions } = await deps.profile()
    return {
      supportedVersions: [...MODERN_PROTOCOL_VERSIONS],
      // The upstreams' capabilities, and the gateway's own tasks extension.
      capabilities: { ...capabilities, extensions: { [TASKS_EXTENSION]: {} } },
      ...(instructions !== undefined && { instructions }),
      ttlMs: deps.listTtlMs,
      cacheScope: 'public',
      _meta: { [SERVER_INFO_KEY]: GATEWAY_INFO },
    }
  })
  for (const method of ['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read']) {
    const list = table.get(method)!
    // What a caller sees depends on its grants when auth.permissions is set, and on its capabilities and the
    // state of its own upstream sessions: then no cache may share it.
    table.set(method, async (params, ctx) => {
      const result = await list(params, ctx)
      return { ...result, ttlMs: deps.listTtlMs, cacheScope: ctx.caller.access.all && deps.catalog.isCommon(ctx.client, ctx.caller.authorization) ? 'public' : 'private' }
    })
  }
  table.set('tools/call', deps.toolsCall)
  table.set('prompts/get', deps.promptsGet)
  for (const [method, handler] of modernTaskMethods(deps)) table.set(method, handler)

  table.set('subscriptions/listen', async (params, ctx) => {
    const requested = optionalObject(params, 'notifications') ?? {}
    const wantedTasks = strings(requested, 'taskIds')
    if (wantedTasks.length > 0 && !declaresTasks(ctx.clientCapabilities)) throw tasksCapabilityRequired()
    const taskIds: string[] = []
    for (const taskId of wantedTasks) {
      if (await deps.tasks.get(ctx.client.principal, taskId).then(() => true, () => false)) taskIds.push(taskId)
    }
    const id = `listen:${randomBytes(9).toString('base64url')}`
    const resourceSubscriptions: string[] = []
    for (const uri of strings(requested, 'resourceSubscriptions')) {
      try {
        const route = (await deps.catalog.view(ctx.client, ctx.caller)).resource(uri, ctx.caller.access)
        await deps.subscriptions.subscribe(id, uri, route.upstream, ctx.client, ctx.caller.authorization)
        resourceSubscriptions.push(uri)
      } catch (err) {
        // Left out of the honoured filter the client gets back, which tells it this URI has no subscription.
        ctx.log.debug({ err, uri }, 'subscriptions/listen: a resource subscription could not be made')
      }
    }
    const filter: ListenFilter = {
      toolsListChanged: flag(requested, 'toolsListChanged'),
      promptsListChanged: flag(requested, 'promptsListChanged'),
      resourcesListChanged: flag(requested, 'resourcesListChanged'),
      resourceSubscriptions,
      taskIds,
    }
    const honored: JsonObject = {}
    for (const [key, value] of Object.entries(filter)) {
      if (value === true || (Array.isArray(value) && value.length > 0)) honored[key] = value
    }
    // A task may run on another gateway process: its changes arrive through the bus, so subscribe first.
    const notifyTask = taskNotifier(deps, ctx)
    const unsubscribers = taskIds.map((taskId) => subscribeTo(deps.bus, BUS.task, taskId, () => notifyTask(taskId)))
    ctx.openStream()
    ctx.send(onSubscription(ctx.requestId, 'notifications/subscriptions/acknowledged', { notifications: honored }))
    const removeListener = deps.listen.add(id, {
      clientKey: ctx.client.key,
      subscriptionId: ctx.requestId,
      filter,
      send: (message) => ctx.send(message),
    })
    // Where each task stands now: it may have changed before the subscription took effect (or ended already).
    for (const taskId of taskIds) notifyTask(taskId)
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }))
    removeListener()
    for (const unsubscribe of unsubscribers) unsubscribe()
    await deps.subscriptions.dropSubscriber(id)
    return {}
  })
  return table
}
