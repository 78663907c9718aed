import type { Catalog } from '../../catalog/catalog.ts'
import { callTarget, type CallEngine, type CallOrigin } from '../../calls/call-engine.ts'
import { liveRequest, requestOrigin, type Handler, type RequestContext } from '../../dispatch/context.ts'
import { optionalObject, optionalString, requireString } from '../../wire/params.ts'
import { GatewayError } from '../../errors.ts'
import { BUS, subscribeTo } from '../../store/bus-channels.ts'
import type { SignalBus, TaskRecord } from '../../store/types.ts'
import type { TaskService } from '../../tasks/task-service.ts'
import { isStoreUnavailable } from '../../tasks/store-retry.ts'
import { isTerminal } from '../../wire/task-state.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'
import type { LegacyTaskDelivery } from './task-delivery.ts'
import { decodeTaskCursor, encodeTaskCursor, renderCreateTaskResult, renderOutcome, renderTask } from './task-wire.ts'

export interface LegacyTaskMethodDeps {
  catalog: Catalog
  calls: CallEngine
  tasks: TaskService
  delivery: LegacyTaskDelivery
  bus: SignalBus
  pageSize: number
}

/** `params.task.ttl` as a number, or undefined; any other shape of `task` is -32602. */
function requestedTtl (params: JsonObject): number | undefined {
  const task = optionalObject(params, 'task')
  const ttl = task?.ttl
  if (ttl === undefined || ttl === null) return undefined
  if (typeof ttl !== 'number' || ttl < 0) throw new GatewayError('GW_ERR_RPC_INVALID_PARAMS', ["'task.ttl' must be a non-negative number of milliseconds"])
  return ttl
}

/** How often a waiting tasks/result reads the task again, in case a wake-up signal was lost. */
const RECHECK_MS = 5000

/**
 * A 2025-era call's input requests go to the client live, as server→client requests on the request's stream;
 * the client answers them by id on any stream, so one stays answerable after its call ended.
 */
function liveOrigin (ctx: RequestContext): CallOrigin {
  return { ...requestOrigin(ctx, liveRequest(ctx)), offersOutliveCall: true }
}

export type LegacyTaskMethod = 'tools/call' | 'prompts/get' | 'tasks/get' | 'tasks/result' | 'tasks/cancel' | 'tasks/list'

/**
 * The handlers of the 2025-11-25 calls: `tools/call` (synchronous, or as a task with `params.task`),
 * `prompts/get`, and the task dialect: `tasks/get`, blocking `tasks/result`, `tasks/list` and `tasks/cancel`.
 * The revision's registry (`methods.ts`) declares them beside the methods both revisions share.
 */
export function legacyTaskMethods (deps: LegacyTaskMethodDeps): Readonly<Record<LegacyTaskMethod, Handler>> {
  const { catalog, calls, tasks, delivery, bus } = deps

  const toolsCall: Handler = async (params, ctx) => {
    const name = requireString(params, 'name')
    const route = (await catalog.view(ctx.client, ctx.caller)).tool(name, ctx.caller.access)
    const support = route.taskSupport
    if (params.task === undefined) {
      if (support === 'required') throw new GatewayError('GW_ERR_TASK_REQUIRED', [name])
      return await calls.run(callTarget(route), params, liveOrigin(ctx))
    }
    // A name no upstream lists is the upstream's to answer as a plain call; no task is made for it.
    if (route.unlisted) throw new GatewayError('GW_ERR_TOOL_NOT_FOUND', [name])
    if (support === 'forbidden') throw new GatewayError('GW_ERR_TASK_FORBIDDEN', [name])
    optionalObject(params, 'arguments')
    const task = await tasks.create({
      principal: ctx.client.principal,
      sessionId: ctx.sessionId ?? null,
      era: '2025-11-25',
      route,
      params,
      requestedTtl: requestedTtl(params),
      progressToken: ctx.progressToken,
      clientCapabilities: ctx.clientCapabilities,
      authorization: ctx.caller.authorization,
      account: ctx.caller.account,
      trace: ctx.trace,
    })
    return renderCreateTaskResult(task, name)
  }

  const tasksResult: Handler = async (params, ctx) => {
    const taskId = requireString(params, 'taskId')
    const principal = ctx.client.principal
    const first = await tasks.get(principal, taskId, ctx.trace)
    const handOver = (task: TaskRecord): JsonObject => {
      tasks.retrieved(task, 'tasks/result')
      return renderOutcome(task)
    }
    if (isTerminal(first.status)) return handOver(first)
    ctx.openStream()
    // The task's end (its TTL): a task still unfinished then is gone, and so is the wait for it.
    const endsAt = first.ttlMs === null ? undefined : first.createdAt + first.ttlMs
    return await new Promise<JsonObject>((resolve, reject) => {
      let detach: (() => void) | undefined
      let finished = false
      const finish = (outcome: () => JsonObject | Promise<JsonObject>): void => {
        if (finished) return
        finished = true
        clearInterval(recheck)
        clearTimeout(atEnd)
        unsubscribe()
        detach?.()
        ctx.signal.removeEventListener('abort', onAbort)
        ctx.disconnected.removeEventListener('abort', onAbort)
        Promise.resolve().then(outcome).then(resolve, reject)
      }
      const check = (): void => {
        tasks.get(principal, taskId).then((task) => {
          if (isTerminal(task.status)) finish(() => handOver(task))
        }, (err: unknown) => finish(() => { throw err }))
      }
      const onAbort = (): void => finish(() => { throw ctx.signal.aborted ? ctx.signal.reason : ctx.disconnected.reason })
      // Wake-ups are signals, at most once: one lost to a store outage must not leave the client waiting forever.
      // A task gone (expired, its outcome never stored) ends the wait with why; a store that stays unavailable
      // ends it once the task's TTL has passed. The task is read again every 5 s and at the end of its TTL.
      const recheckNow = (): void => {
        tasks.get(principal, taskId).then((task) => {
          if (isTerminal(task.status)) finish(() => handOver(task))
        }, (err: unknown) => {
          if (!isStoreUnavailable(err) || Date.now() >= (endsAt ?? Infinity)) finish(() => { throw err })
        })
      }
      const recheck = setInterval(recheckNow, RECHECK_MS)
      const atEnd = endsAt === undefined ? undefined : setTimeout(recheckNow, Math.max(0, endsAt - Date.now()) + 1)
      const unsubscribe = subscribeTo(bus, BUS.task, taskId, (event) => {
        if (isTerminal(event.status)) check()
      })
      ctx.signal.addEventListener('abort', onAbort, { once: true })
      ctx.disconnected.addEventListener('abort', onAbort, { once: true })
      delivery.attachResultStream(taskId, (message) => ctx.send(message), ctx.sessionId).then((unregister) => {
        if (finished) unregister()
        else detach = unregister
        check()
      }, (err: unknown) => finish(() => { throw err }))
    })
  }

  return {
    'tools/call': toolsCall,
    // An upstream that asks for input while building a prompt is answered live too.
    'prompts/get': async (params, ctx) => {
      const route = (await catalog.view(ctx.client, ctx.caller)).prompt(requireString(params, 'name'), ctx.caller.access)
      return await calls.run(callTarget(route), params, liveOrigin(ctx), 'prompts/get')
    },
    'tasks/get': async (params, ctx) => renderTask(await tasks.get(ctx.client.principal, requireString(params, 'taskId'), ctx.trace)),
    'tasks/result': tasksResult,
    'tasks/cancel': async (params, ctx) => renderTask(await tasks.cancel(ctx.client.principal, requireString(params, 'taskId'), 'client', ctx.trace)),
    'tasks/list': async (params, ctx) => {
      const cursor = optionalString(params, 'cursor')
      const after = cursor === undefined ? undefined : decodeTaskCursor(cursor)
      if (cursor !== undefined && after === undefined) throw new GatewayError('GW_ERR_RPC_INVALID_PARAMS', ["'cursor' is not a cursor this gateway issued; start again without a cursor"])
      const page = await tasks.list(ctx.client.principal, after, deps.pageSize + 1)
      const more = page.length > deps.pageSize
      const shown = more ? page.slice(0, deps.pageSize) : page
      const last = shown.at(-1)
      const rendered = shown.map(renderTask)
      return more && last ? { tasks: rendered, nextCursor: encodeTaskCursor(last.createdAt, last.id) } : { tasks: rendered }
    },
  }
}
