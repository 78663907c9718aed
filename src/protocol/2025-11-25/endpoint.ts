import { randomUUID } from 'node:crypto'
import type { IncomingHttpHeaders, ServerResponse } from 'node:http'
import type { Caller } from '../../auth/access.ts'
import type { ServerProfile } from '../../catalog/server-profile.ts'
import type { Live } from '../../config/live.ts'
import type { MethodTable } from '../../dispatch/context.ts'
import { lookupHandler } from '../../dispatch/method-table.ts'
import { errorResponse, writeHttpError } from '../../wire/error-replies.ts'
import { GatewayError } from '../../errors.ts'
import type { Logger } from '../../observability/logger.ts'
import type { RequestTrace } from '../../observability/request-trace.ts'
import type { GatewayStore, SessionRecord } from '../../store/types.ts'
import { sessionClient } from '../../upstream/client-ref.ts'
import { progressTokenOf, resultMessage, type JsonObject, type RpcNotification, type RpcRequest, type RpcResponse } from '../../wire/jsonrpc.ts'
import type { ValidMessage } from '../../wire/classified-message.ts'
import { isLegacyVersion } from '../../wire/versions.ts'
import type { ClientRequestBroker } from './client-requests.ts'
import type { InflightRequests } from './inflight-requests.ts'
import { ExchangeContext } from '../../streams/exchange-context.ts'
import { PostExchange } from '../../streams/post-exchange.ts'
import { checkStoredSizes, initializeResult, validateInitialize } from './initialize.ts'
import type { StreamHub } from '../../streams/stream-hub.ts'
import { listChangeAnsweredBy } from '../../wire/list-changes.ts'
import type { RecentProblems } from '../../observability/recent-problems.ts'

export interface LegacyEndpointDeps {
  store: GatewayStore
  hub: StreamHub
  broker: ClientRequestBroker
  inflight: InflightRequests
  methods: MethodTable
  log: Logger
  /** Aborted when the gateway gives up on in-flight requests during shutdown. */
  shutdown: AbortSignal
  /** Routes a client's answer to a queued task input; false when no pending input of the principal has that id. */
  answerInput (principal: string, response: RpcResponse): Promise<boolean>
  /** Least time between two records of a session's use (see touchInterval). */
  touchIntervalMs: number
  /** Sessions one principal (without auth: one client address) may hold (limits.sessionsPerPrincipal). */
  readonly sessionsPerPrincipal: Live<number>
  /** Largest `capabilities` and `clientInfo` (as JSON) a session stores (limits.clientInfoBytes). */
  readonly clientInfoBytes: Live<number>
  /** The bytes one principal (without auth: one client address) may store, its sessions included (limits.storedBytesPerPrincipal). */
  readonly storedBytesPerPrincipal: Live<number>
  /** What initialize announces: the upstreams' capabilities and instructions, once every upstream's first connect has ended. */
  profile (): Promise<ServerProfile>
  /** Called when a session ends (DELETE), to release what it held. */
  onSessionClosed (sessionId: string): void
  /** A notification of the client for its upstream sessions (roots/list_changed). */
  onClientNotification (clientKey: string, method: string, params: JsonObject): void
  /** The refusals and errors the dashboard lists: told who made the request each one ended. */
  problems?: RecentProblems | undefined
}

/** Records a session's use at most this often, and at least four times per idle timeout. */
export function touchInterval (sessionIdleTimeoutMs: number): number {
  return Math.max(1, Math.min(10_000, Math.floor(sessionIdleTimeoutMs / 4)))
}

function header (headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name]
  return Array.isArray(value) ? value[0] : value
}

/** Aborted when the client's connection closes before it was answered (it no longer waits). */
function closedSignal (res: ServerResponse): AbortSignal {
  const controller = new AbortController()
  res.once('close', () => {
    if (!res.writableFinished) controller.abort(new GatewayError('GW_ERR_REQUEST_CANCELLED', ['the client went away']))
  })
  return controller.signal
}

/** The legacy era (2024-11-05 … 2025-11-25) of the Streamable HTTP endpoint: sessions, POST, GET, DELETE. */
export class LegacyEndpoint {
  readonly #deps: LegacyEndpointDeps

  constructor (deps: LegacyEndpointDeps) {
    this.#deps = deps
  }

  /**
   * `inbound`: the message as the route classified it; `caller.principal` is the authenticated caller, or
   * undefined when auth is off; `trace`: the request's server span (tracing on).
   */
  async post (
    headers: IncomingHttpHeaders,
    res: ServerResponse,
    inbound: ValidMessage,
    caller: Caller,
    trace?: RequestTrace,
  ): Promise<void> {
    const principal = caller.principal
    if (inbound.kind === 'request' && inbound.method === 'initialize') {
      await this.#initialize(inbound.message, res, caller)
      return
    }
    const session = await this.#session(headers, inbound.kind === 'request' ? inbound.method : 'this message', principal)
    if (inbound.kind === 'notification') {
      await this.#notification(session, inbound.message)
      res.writeHead(202).end()
    } else if (inbound.kind === 'response') {
      const answered = await this.#deps.broker.accept(session.id, inbound.message, closedSignal(res)) ||
        await this.#deps.answerInput(session.principal, inbound.message)
      if (answered) {
        res.writeHead(202).end()
      } else {
        writeHttpError(res, new GatewayError('GW_ERR_HTTP_INVALID_MESSAGE', [`no request with id ${JSON.stringify(inbound.message.id)} is waiting for an answer in this session`]))
      }
    } else {
      await this.#request(session, caller, inbound.message, res, trace)
    }
  }

  /** The stream lasts as long as `caller`'s credential (see HeldExchanges). */
  async get (headers: IncomingHttpHeaders, res: ServerResponse, caller: Caller): Promise<void> {
    const session = await this.#session(headers, 'GET', caller.principal)
    // Over limits.streamsPerSession this throws before writing: the route answers 429.
    this.#deps.hub.openGetStream(session.id, res, header(headers, 'last-event-id'), { 'mcp-session-id': session.id }, caller)
  }

  async delete (headers: IncomingHttpHeaders, res: ServerResponse, principal: string | undefined): Promise<void> {
    const session = await this.#session(headers, 'DELETE', principal)
    await this.#deps.store.sessions.delete(session.id)
    this.#deps.hub.closeSession(session.id)
    this.#deps.onSessionClosed(session.id)
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
  }

  async #initialize (request: RpcRequest, res: ServerResponse, caller: Caller): Promise<void> {
    const params = request.params ?? {}
    const principal = caller.principal
    try {
      validateInitialize(params)
      checkStoredSizes(params, this.#deps.clientInfoBytes)
    } catch (err) {
      // A JSON-RPC error of the request: the exchange itself succeeded.
      writeHttpError(res, err, { id: request.id, status: 200 })
      return
    }
    // Without auth every session is its own principal: the limits bind its client address (caller.account).
    // The store checks them and stores the session in one atomic step: racing initializes never overshoot.
    const account = caller.account ?? principal
    const now = Date.now()
    const id = randomUUID()
    const { result, session } = initializeResult(params, id, now, principal, await this.#deps.profile())
    await this.#deps.store.sessions.create(session, {
      ...(account !== undefined && { account, maxSessions: this.#deps.sessionsPerPrincipal }),
      maxStoredBytes: this.#deps.storedBytesPerPrincipal,
    })
    this.#deps.log.info({ sessionId: id, protocolVersion: session.protocolVersion, client: session.clientInfo }, 'session initialized')
    const body = JSON.stringify(resultMessage(request.id, result))
    res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': id, 'content-length': Buffer.byteLength(body) }).end(body)
  }

  /** The request's session; one that belongs to another principal is treated exactly like an unknown one. */
  async #session (headers: IncomingHttpHeaders, what: string, principal: string | undefined): Promise<SessionRecord> {
    const id = header(headers, 'mcp-session-id')
    if (!id) throw new GatewayError('GW_ERR_SESSION_REQUIRED', [what])
    const version = header(headers, 'mcp-protocol-version')
    if (version !== undefined && !isLegacyVersion(version)) {
      throw new GatewayError('GW_ERR_PROTOCOL_VERSION_HEADER', [version, 'is not a supported protocol version'])
    }
    const session = await this.#deps.store.sessions.get(id)
    if (!session || (principal !== undefined && session.principal !== principal)) throw new GatewayError('GW_ERR_SESSION_NOT_FOUND')
    const now = Date.now()
    if (now - session.lastSeenAt > this.#deps.touchIntervalMs) await this.#deps.store.sessions.touch(id, now)
    return session
  }

  async #notification (session: SessionRecord, message: RpcNotification): Promise<void> {
    if (message.method === 'notifications/roots/list_changed') {
      const client = sessionClient(session.id, session.principal, session.clientCapabilities)
      this.#deps.onClientNotification(client.key, message.method, message.params ?? {})
    } else if (message.method === 'notifications/cancelled') {
      const requestId = message.params?.requestId
      if (typeof requestId === 'string' || typeof requestId === 'number') {
        const reason = typeof message.params?.reason === 'string' ? message.params.reason : 'cancelled by the client'
        await this.#deps.inflight.cancel(session.id, requestId, reason)
      }
    }
  }

  async #request (
    session: SessionRecord,
    caller: Caller,
    request: RpcRequest,
    res: ServerResponse,
    trace: RequestTrace | undefined,
  ): Promise<void> {
    const deps = this.#deps
    const inflight = deps.inflight.start(session.id, request.id)
    const exchange = new PostExchange(res, {
      hub: deps.hub,
      sessionId: session.id,
      requestId: request.id,
      headers: { 'mcp-session-id': session.id },
      caller,
      // A revoked credential ends the request as a cancellation would: what it waits for stops too.
      onRevoked: (err) => { inflight.abort(err) },
    })
    const params = request.params ?? {}
    const ctx = new ExchangeContext(exchange, {
      client: sessionClient(session.id, session.principal, session.clientCapabilities),
      clientCapabilities: session.clientCapabilities,
      sessionId: session.id,
      caller,
      requestId: request.id,
      progressToken: progressTokenOf(params),
      log: deps.log,
      trace,
      abort: inflight,
      shutdown: deps.shutdown,
      ask: (method, requestParams, signal, emit) => deps.broker.send(session.id, emit, method, requestParams, signal),
    })
    try {
      // Before a list is read: the session will hear of that list's next change (StreamHub.listed).
      if (listChangeAnsweredBy(request.method) !== undefined) await deps.hub.listed(session.id, request.method)
      const result = await lookupHandler(deps.methods, request.method)(params, ctx)
      if (result.isError === true) trace?.toolError()
      if (inflight.aborted && !deps.shutdown.aborted) exchange.abandon()
      else exchange.respond(resultMessage(request.id, result))
    } catch (err) {
      if (inflight.aborted && !deps.shutdown.aborted) {
        exchange.abandon()
      } else {
        if (!(err instanceof GatewayError) || err.statusCode >= 500) deps.log.warn({ err, method: request.method, sessionId: session.id }, 'request failed')
        trace?.failed(err)
        deps.problems?.attribute(err, { principal: session.principal, address: caller.address })
        exchange.respond(errorResponse(request.id, err))
      }
    } finally {
      inflight.done()
    }
  }
}
