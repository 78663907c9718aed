import { randomBytes } from 'node:crypto'
import type { Catalog } from '../../catalog/catalog.ts'
import type { ResourceSubscriptions } from '../../catalog/resource-subscriptions.ts'
import type { Handler, RequestContext } from '../../dispatch/context.ts'
import { optionalObject } from '../../wire/params.ts'
import { BUS, subscribeTo } from '../../store/bus-channels.ts'
import type { SignalBus, TaskStore } from '../../store/types.ts'
import type { TaskService } from '../../tasks/task-service.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'
import { declaresTasks, tasksCapabilityRequired } from './envelope.ts'
import { onSubscription, type ListenFilter, type ListenHub } from './listen-hub.ts'
import { renderDetailedTask, renderLostTask } from './task-wire.ts'
import { GatewayError } from '../../errors.ts'
import { ignoreWithTrace } from '../../observability/ignored.ts'

export interface ListenDeps {
  catalog: Catalog
  listen: ListenHub
  subscriptions: ResourceSubscriptions
  bus: SignalBus
  store: TaskStore
  tasks: TaskService
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
function taskNotifier (deps: ListenDeps, ctx: RequestContext): (taskId: string) => void {
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

/**
 * `subscriptions/listen`: one stream of the notifications the client asks for (list changes, its resource
 * subscriptions, its tasks), open until the client closes it; the 2026-07-28 revision's only standing stream.
 */
export function listenMethod (deps: ListenDeps): Handler {
  return async (params, ctx) => {
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
  }
}
