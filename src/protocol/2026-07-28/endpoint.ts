import type { IncomingHttpHeaders, ServerResponse } from 'node:http'
import type { Access, Caller } from '../../auth/access.ts'
import type { MethodTable } from '../../dispatch/context.ts'
import { lookupHandler } from '../../dispatch/method-table.ts'
import { errorResponse, writeHttpError } from '../../wire/error-replies.ts'
import { GatewayError } from '../../errors.ts'
import type { Logger } from '../../observability/logger.ts'
import type { RequestTrace } from '../../observability/request-trace.ts'
import { principalClient, type ClientRef } from '../../upstream/client-ref.ts'
import { progressTokenOf, resultMessage, type JsonObject, type RpcRequest } from '../../wire/jsonrpc.ts'
import type { ValidMessage } from '../../wire/classified-message.ts'
import { ExchangeContext } from '../../streams/exchange-context.ts'
import { PostExchange } from '../../streams/post-exchange.ts'
import type { StreamHub } from '../../streams/stream-hub.ts'
import type { RecentProblems } from '../../observability/recent-problems.ts'
import { checkHeaders, type ToolSchemaLookup } from './header-checks.ts'
import { modernErrorStatus, readEnvelope, withoutEnvelope, type Envelope } from './envelope.ts'

/** What a result without a `resultType` is given (by Object.assign: a spread that adds a key costs far more). */
const COMPLETE = Object.freeze({ resultType: 'complete' })

export interface ModernEndpointDeps {
  hub: StreamHub
  methods: MethodTable
  log: Logger
  shutdown: AbortSignal
  /** The input schema of a tool `access` may use, as `client` sees it; undefined for any other. */
  toolSchema (name: string, access: Access, client: ClientRef): ReturnType<ToolSchemaLookup>
  /** The refusals and errors the dashboard lists: told who made the request each one ended. */
  problems?: RecentProblems | undefined
}

/** The principal of a modern request without auth: no sessions exist, task ids act as bearer capabilities. */
export const ANONYMOUS_MODERN = 'anonymous'

/** Where the stream hub counts a principal's open request streams (modern requests have no session). */
function streamOwner (principal: string): string {
  return `modern:${principal}`
}

/**
 * The modern era (2026-07-28) of the endpoint: every request stands alone, validated against its own
 * envelope and routing headers; a client that closes the response stream cancels the request; every
 * result carries `resultType`.
 */
export class ModernEndpoint {
  readonly #deps: ModernEndpointDeps

  constructor (deps: ModernEndpointDeps) {
    this.#deps = deps
  }

  /** `inbound`: the message as the route classified it; `trace`: the request's server span (tracing on). */
  async post (
    headers: IncomingHttpHeaders,
    res: ServerResponse,
    inbound: ValidMessage,
    caller: Caller,
    trace?: RequestTrace,
  ): Promise<void> {
    if (inbound.kind === 'notification') {
      res.writeHead(202).end()
      return
    }
    if (inbound.kind === 'response') {
      throw new GatewayError('GW_ERR_HTTP_INVALID_MESSAGE', ['the 2026-07-28 protocol has no server-to-client requests to answer; answer input requests with a retry or tasks/update'])
    }
    const request = inbound.message
    const deps = this.#deps
    let envelope: Envelope
    let client: ClientRef
    try {
      const version = headers['mcp-protocol-version']
      envelope = readEnvelope(request.params, Array.isArray(version) ? version[0] : version)
      client = principalClient(caller.principal ?? ANONYMOUS_MODERN, envelope.clientCapabilities)
      checkHeaders(headers, request, (name) => deps.toolSchema(name, caller.access, client))
      if (!deps.methods.has(request.method)) throw new GatewayError('GW_ERR_MODERN_METHOD_NOT_FOUND', [request.method])
    } catch (err) {
      trace?.failed(err)
      writeHttpError(res, err, { id: request.id })
      return
    }
    await this.#request(request, envelope, client, res, caller, trace)
  }

  async #request (
    request: RpcRequest,
    envelope: Envelope,
    client: ClientRef,
    res: ServerResponse,
    caller: Caller,
    trace: RequestTrace | undefined,
  ): Promise<void> {
    const deps = this.#deps
    const principal = caller.principal ?? ANONYMOUS_MODERN
    const exchange = new PostExchange(res, { hub: deps.hub, sessionId: streamOwner(principal), requestId: request.id, headers: {}, caller })
    const params = withoutEnvelope(request.params ?? {})
    // No `ask`: this era has no server→client requests (input comes back as input_required).
    const ctx = new ExchangeContext(exchange, {
      client,
      clientCapabilities: envelope.clientCapabilities,
      sessionId: undefined,
      caller,
      requestId: request.id,
      progressToken: progressTokenOf(params),
      log: deps.log,
      trace,
      abort: undefined,
      shutdown: deps.shutdown,
      ask: undefined,
    })
    try {
      const result: JsonObject = await lookupHandler(deps.methods, request.method)(params, ctx)
      if (result.isError === true) trace?.toolError()
      if (exchange.isDisconnected) exchange.abandon()
      else exchange.respond(resultMessage(request.id, 'resultType' in result ? result : Object.assign({}, result, COMPLETE)))
    } catch (err) {
      trace?.failed(err)
      deps.problems?.attribute(err, { principal, address: caller.address })
      if (exchange.isDisconnected) {
        exchange.abandon()
      } else if (modernErrorStatus(err) === 400 && !res.headersSent) {
        writeHttpError(res, err, { id: request.id, status: 400 })
      } else {
        if (!(err instanceof GatewayError) || err.statusCode >= 500) deps.log.warn({ err, method: request.method }, 'request failed')
        exchange.respond(errorResponse(request.id, err))
      }
    }
  }
}
