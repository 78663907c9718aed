import { randomBytes } from 'node:crypto'
import type { Access, Caller, Credential } from '../auth/access.ts'
import { liveRequest, type Handler, type MethodTable, type RequestContext } from '../dispatch/context.ts'
import { GatewayError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import type { GatewayTracing } from '../observability/tracing.ts'
import { isObject, type JsonObject, type RpcMessage } from '../wire/jsonrpc.ts'
import type { InputMethod } from '../upstream/call-attribution.ts'
import type { ClientRef } from '../upstream/client-ref.ts'
import { openText, sealText, sealingKey } from '../store/sealed-text.ts'
import type { ClientHomes } from './client-homes.ts'
import { wasUndelivered, type PeerRequests } from './peer-requests.ts'

const REQUEST = 'home/request'
const ASK = 'home/ask'
/** The HKDF label of the key a forwarded Authorization header is sealed with: the key seals nothing else. */
const AUTHORIZATION_KEY_LABEL = 'mcp-task-gateway forwarded authorization key v1'

/** The key the processes sharing `server.stateSecret` seal a forwarded caller's Authorization header with. */
export function forwardedAuthorizationKey (stateSecret: string): Buffer {
  return sealingKey(stateSecret, AUTHORIZATION_KEY_LABEL)
}

/** What a sealed Authorization header is bound to: the one forwarded request it travels with. */
const sealedFor = (forwardId: string): Buffer => Buffer.from(`forwarded authorization\n${forwardId}`, 'utf8')

export interface HomeRoutingDeps {
  homes: ClientHomes
  peers: PeerRequests
  /** The caller's grants, rebuilt from their key (`Access.key`) on the process serving a forwarded request. */
  access (key: string): Access
  log: Logger
  /** Where forwarded requests are traced; undefined when tracing is off. */
  tracing?: GatewayTracing | undefined
  /**
   * The key a caller's Authorization header (kept for `forwardAuthorization` upstreams) is sealed with on the peer
   * channel (forwardedAuthorizationKey); undefined (no server.stateSecret, so no other process): never forwarded.
   */
  authorizationKey?: Buffer | undefined
}

/** A request as it travels to the client's home. */
interface Forwarded {
  table: string
  method: string
  params: JsonObject
  client: ClientRef
  clientCapabilities: JsonObject
  sessionId: string | null
  /** Whether the client can be sent server→client requests (2025-era requests can; 2026-07-28 ones cannot). */
  asks: boolean
  principal: string | null
  access: string
  /**
   * The caller's Authorization header, sealed (AES-256-GCM, bound to forwardId): a token never crosses the peer
   * channel in clear. Its own name: a process of the version that sent it in clear ignores it.
   */
  sealedAuthorization?: string | null
  /** What the caller authenticated with (a fingerprint, never the token): the home ends held calls with it. */
  credential?: Credential | null
  /** Whom the caller's limits count (Caller.account); absent: the principal. */
  account?: string | null
  requestId: string | number
  progressToken: string | number | null
  forwardId: string
  /** The forwarding request's trace context (tracing on), continued by the home. */
  traceparent?: string | null
}

function forwardedOf (payload: JsonObject): Forwarded {
  const f = payload as unknown as Forwarded
  if (typeof f.table !== 'string' || typeof f.method !== 'string' || !isObject(f.params) || !isObject(f.clientCapabilities) || !isObject(f.client) || typeof f.forwardId !== 'string') {
    throw new GatewayError('GW_ERR_INTERNAL', ['a malformed request from another gateway process'])
  }
  return f
}

/** The forwarded credential, if it has the shape the forwarding process sends; else none (nothing to revoke). */
function credentialOf (value: unknown): Credential | undefined {
  if (!isObject(value)) return undefined
  const { kind, sha256, scopes, expiresAt } = value
  if ((kind !== 'token' && kind !== 'oauth') || typeof sha256 !== 'string' || !Array.isArray(scopes)) return undefined
  if (expiresAt !== undefined && expiresAt !== null && typeof expiresAt !== 'number') return undefined
  return { kind, sha256, scopes: scopes.filter((s): s is string => typeof s === 'string'), expiresAt: expiresAt ?? undefined }
}

/**
 * Runs the requests that need a client's upstream sessions on the client's home, whichever gateway process
 * they reached. A request for a client homed elsewhere goes there over the peer channel; the home runs it
 * with a context whose stream writes (progress, SSE events) and server→client requests (elicitation,
 * sampling, roots) travel back to the process holding the client's HTTP exchange, and a cancellation of
 * the client travels there. A home that no longer receives requests is replaced, and the request runs on
 * the new one. Without a shared store every process is its own clients' home and nothing travels.
 */
export class HomeRouting {
  readonly #deps: HomeRoutingDeps
  readonly #tables = new Map<string, MethodTable>()
  /** Requests this process forwarded, by forward id, for the home's server→client requests. */
  readonly #forwarded = new Map<string, RequestContext>()

  constructor (deps: HomeRoutingDeps) {
    this.#deps = deps
    deps.peers.handle(REQUEST, async (payload, signal, emit, from) => await this.#serve(forwardedOf(payload), signal, emit, from))
    deps.peers.handle(ASK, async (payload, signal) => {
      const ctx = this.#forwarded.get(String(payload.forwardId))
      if (!ctx) throw new GatewayError('GW_ERR_INTERNAL', ['the request this input belongs to is no longer waiting'])
      return await liveRequest(ctx)(payload.method as InputMethod, (payload.params ?? {}) as JsonObject, signal)
    })
  }

  /**
   * `table` with `home`, the methods that use the client's upstream sessions (those its revision's registry
   * declares so, `homeMethods`), routed to each client's home; `name` tells the tables apart between processes.
   */
  route (name: string, table: MethodTable, home: readonly string[]): MethodTable {
    this.#tables.set(name, table)
    const routed = new Map(table)
    for (const method of home) {
      const local = table.get(method)
      if (local) routed.set(method, this.#routed(name, method, local))
    }
    return routed
  }

  #routed (table: string, method: string, local: Handler): Handler {
    const { homes } = this.#deps
    return async (params, ctx) => {
      const key = ctx.client.key
      let home = await homes.resolve(key)
      if (home === homes.processId) return await local(params, ctx)
      try {
        return await this.#forward(home, table, method, params, ctx)
      } catch (err) {
        if (!wasUndelivered(err)) throw err
        home = await homes.replace(key, home)
        if (home === homes.processId) return await local(params, ctx)
        return await this.#forward(home, table, method, params, ctx)
      }
    }
  }

  async #forward (home: string, table: string, method: string, params: JsonObject, ctx: RequestContext): Promise<JsonObject> {
    const forwardId = randomBytes(12).toString('base64url')
    const payload: Forwarded = {
      table,
      method,
      params,
      client: ctx.client,
      clientCapabilities: ctx.clientCapabilities,
      sessionId: ctx.sessionId ?? null,
      asks: ctx.request !== undefined,
      principal: ctx.caller.principal ?? null,
      access: ctx.caller.access.key,
      sealedAuthorization: this.#seal(ctx.caller.authorization, forwardId),
      credential: ctx.caller.credential ?? null,
      account: ctx.caller.account ?? null,
      requestId: ctx.requestId,
      progressToken: ctx.progressToken ?? null,
      forwardId,
      traceparent: ctx.trace?.traceparent() ?? null,
    }
    this.#forwarded.set(forwardId, ctx)
    try {
      return await this.#deps.peers.request(home, REQUEST, payload as unknown as JsonObject, ctx.signal, (event) => {
        if (event.type === 'open') ctx.openStream()
        else if (event.type === 'send' && isObject(event.message)) ctx.send(event.message as unknown as RpcMessage)
      })
    } finally {
      this.#forwarded.delete(forwardId)
    }
  }

  #seal (authorization: string | undefined, forwardId: string): string | null {
    const key = this.#deps.authorizationKey
    if (authorization === undefined || key === undefined) return null
    return sealText(key, sealedFor(forwardId), authorization)
  }

  #open (sealed: string | null | undefined, forwardId: string): string | undefined {
    const key = this.#deps.authorizationKey
    if (typeof sealed !== 'string' || key === undefined) return undefined
    const authorization = openText(key, sealedFor(forwardId), sealed)
    if (authorization === undefined) this.#deps.log.warn('a forwarded request\'s Authorization header does not open (sealed under another server.stateSecret, or for another request); it runs without it')
    return authorization
  }

  /** Runs a request another process forwarded, as if its client had sent it here. */
  async #serve (f: Forwarded, signal: AbortSignal, emit: (event: JsonObject) => void, from: string): Promise<JsonObject> {
    const handler = this.#tables.get(f.table)?.get(f.method)
    if (!handler) throw new GatewayError('GW_ERR_RPC_METHOD_NOT_FOUND', [f.method])
    const caller: Caller = {
      principal: f.principal ?? undefined,
      access: this.#deps.access(f.access),
      authorization: this.#open(f.sealedAuthorization, f.forwardId),
      credential: credentialOf(f.credential),
      account: f.account ?? undefined,
    }
    const send = (message: RpcMessage): void => emit({ type: 'send', message: message as unknown as JsonObject })
    const trace = this.#deps.tracing?.forwarded(f.method, f.traceparent ?? null, f.requestId)
    const ctx: RequestContext = {
      client: f.client,
      clientCapabilities: f.clientCapabilities,
      sessionId: f.sessionId ?? undefined,
      caller,
      requestId: f.requestId,
      signal,
      progressToken: f.progressToken ?? undefined,
      log: this.#deps.log,
      disconnected: signal,
      openStream: () => emit({ type: 'open' }),
      send,
      notify: (method, params) => send({ jsonrpc: '2.0', method, params }),
      request: f.asks
        ? async (method, params, requestSignal) =>
          await this.#deps.peers.request(from, ASK, { forwardId: f.forwardId, method, params }, requestSignal)
        : undefined,
      trace,
    }
    // The home may have moved since the sender looked it up (it lapsed and another process took it).
    try {
      const home = await this.#deps.homes.resolve(f.client.key)
      if (home !== this.#deps.homes.processId) return await this.#forward(home, f.table, f.method, f.params, ctx)
      this.#deps.log.debug({ method: f.method, client: f.client.key }, 'serving a request another gateway process forwarded to the client\'s home')
      const result = await handler(f.params, ctx)
      if (result.isError === true) trace?.toolError()
      return result
    } catch (err) {
      // The forwarding process's client went away (or this process is stopping).
      if (signal.aborted) this.#deps.log.debug({ method: f.method, client: f.client.key }, 'stopped serving a forwarded request')
      trace?.failed(err)
      throw err
    } finally {
      trace?.end(200, false)
    }
  }
}
