import { ProtocolError } from '@modelcontextprotocol/client'
import { GatewayError, RpcError, isHandover } from '../errors.ts'
import type { JsonObject, RequestId } from '../wire/jsonrpc.ts'
import { isInputMethod, untagged, type InputMethod } from './call-attribution.ts'
import { ClientSideTasks, isClientTaskMethod } from './client-side-tasks.ts'
import { withoutSubscriptionId } from './listen-stream.ts'
import type { SessionEvents, UpstreamSession } from './upstream-session.ts'

function toProtocolError (err: unknown): unknown {
  return err instanceof RpcError || err instanceof GatewayError ? new ProtocolError(err.rpcCode, err.message, err.data) : err
}

/** `params` without the task augmentation (`params.task`): the plain request a client is asked. */
function withoutTask (params: JsonObject): JsonObject {
  if (!('task' in params)) return params
  const { task: _task, ...plain } = params
  return plain
}

/**
 * What an upstream sends its session's client: requests (elicitation, sampling, roots; and, from a server
 * whose client runs tasks for it, the tasks/* requests about those), list changes, resource updates, log
 * messages and task status. Requests and notifications go to the call they belong to (see CallRegistry),
 * else to the session's client.
 */
export class UpstreamInbound {
  readonly #session: UpstreamSession
  readonly #events: SessionEvents
  /** The tasks the gateway runs for the client's server when the client declared `tasks.requests` (client-side tasks). */
  readonly clientTasks = new ClientSideTasks()

  constructor (session: UpstreamSession, events: SessionEvents) {
    this.#session = session
    this.#events = events
  }

  install (): void {
    const session = this.#session
    const events = this.#events
    const client = session.client
    // Every input request goes to the call's channel (or the client), which relays it when the client
    // declared what it needs, else refuses it with GW_ERR_CLIENT_CAPABILITY_MISSING (and tells its client
    // what was missing). No handler is registered per method: the SDK wraps those in checks of its own
    // (an elicitation mode the session did not declare gets a -32602 of the SDK's) that would answer the
    // upstream before the gateway could.
    client.fallbackRequestHandler = async (request, ctx) => {
      const params = (request.params ?? {}) as JsonObject
      const capabilities = session.capabilities as JsonObject
      if (isClientTaskMethod(request.method) && capabilities.tasks !== undefined) {
        return await this.clientTasks.answer(request.method, untagged(params), ctx.mcpReq.signal)
      }
      if (!isInputMethod(request.method)) throw new ProtocolError(-32601, `Method not found: ${request.method}`)
      if (params.task === undefined) return await this.#input(request.method, params, ctx.mcpReq.signal, ctx.mcpReq.id)
      // A client that did not declare tasks for this request is asked it plainly (as the spec has a receiver do).
      if (this.clientTasks.accepts(capabilities, request.method)) return this.#clientTask(request.method, params)
      return await this.#input(request.method, withoutTask(params), ctx.mcpReq.signal, ctx.mcpReq.id)
    }
    client.setNotificationHandler('notifications/tools/list_changed', () => events.onListChanged(session, 'tools'))
    client.setNotificationHandler('notifications/prompts/list_changed', () => events.onListChanged(session, 'prompts'))
    client.setNotificationHandler('notifications/resources/list_changed', () => events.onListChanged(session, 'resources'))
    client.setNotificationHandler('notifications/resources/updated', (n) => events.onResourceUpdated(session, withoutSubscriptionId(untagged(n.params as JsonObject))))
    client.setNotificationHandler('notifications/message', (n) => this.#notification(n.method, n.params as JsonObject))
    // Of the other notifications, only a 2025-era upstream's status of its own task matters (to the call it runs).
    client.fallbackNotificationHandler = async (n) => {
      if (n.method === 'notifications/tasks/status') this.#taskStatus((n.params ?? {}) as JsonObject)
    }
  }

  /**
   * A task-augmented request the client runs as a task: the gateway answers it with a task of its own at once,
   * and asks the client the plain request, for the call the request belongs to (until that call ends, when the
   * upstream named it) or for the session's client. The upstream's request is answered already, so no other
   * process may answer it again (no upstream request id goes with it).
   */
  #clientTask (method: InputMethod, params: JsonObject): JsonObject {
    const owner = this.#session.calls.attribute(params)
    const callEnded = typeof owner === 'object' && owner.exact ? this.#session.calls.ended(owner.call) : undefined
    const plain = withoutTask(params)
    return this.clientTasks.create(params.task as JsonObject | undefined, async (signal) => {
      return await this.#input(method, plain, callEnded === undefined ? signal : AbortSignal.any([signal, callEnded]), undefined)
    })
  }

  /**
   * Gives a request of the upstream to the call it belongs to, else to the session's client. A request
   * given to a call by guess goes to another when that call ends first, unless it stays answerable (see CallRegistry).
   */
  async #input (method: InputMethod, params: JsonObject, signal: AbortSignal, id: RequestId | undefined): Promise<JsonObject> {
    const session = this.#session
    const plain = untagged(params)
    try {
      for (;;) {
        const owner = session.calls.attribute(params)
        if (owner === 'ambiguous') {
          throw new ProtocolError(-32603, `calls of several clients are in flight on this upstream session, so the gateway cannot tell whose '${method}' this is (configure this upstream with sessions: per-client or per-call)`)
        }
        if (owner === 'none') return await this.#events.onOrphanRequest(session, method, plain, signal)
        const { call, exact } = owner
        const ended = exact || call.offersOutliveCall ? undefined : session.calls.ended(call)
        try {
          return await call.ask(method, plain, ended === undefined ? signal : AbortSignal.any([signal, ended]), id)
        } catch (err) {
          if (ended === undefined || signal.aborted || !ended.aborted) throw err
        }
      }
    } catch (err) {
      // The task was handed over to another process, which answers the upstream: this one must not.
      if (isHandover(err)) await new Promise((resolve) => { signal.addEventListener('abort', resolve, { once: true }) })
      throw toProtocolError(err)
    }
  }

  #notification (method: string, params: JsonObject): void {
    const owner = this.#session.calls.attribute(params, method)
    const plain = untagged(params)
    if (typeof owner === 'object') owner.call.notify(method, plain)
    else this.#events.onOrphanNotification(this.#session, method, plain)
  }

  /** The status of an upstream task goes to the call that runs as that task, and to nobody else. */
  #taskStatus (params: JsonObject): void {
    const owner = this.#session.calls.attribute(params, 'notifications/tasks/status')
    if (typeof owner !== 'object' || typeof params.taskId !== 'string' || typeof params.status !== 'string') return
    const statusMessage = typeof params.statusMessage === 'string' ? params.statusMessage : undefined
    owner.call.taskStatus({ taskId: params.taskId, status: params.status, statusMessage })
  }
}
