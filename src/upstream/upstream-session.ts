import { Client, type ClientCapabilities, type PriorDiscovery, type RequestOptions } from '@modelcontextprotocol/client'
import { GATEWAY_INFO, TASKS_EXTENSION } from '../wire/versions.ts'
import { z } from 'zod'
import type { UpstreamConfig } from '../config/schema.ts'
import { GatewayError, type WireError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import type { TraceParent } from '../observability/tracing.ts'
import { withTraceMeta } from '../observability/trace-context.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import type { ResumeAddress } from '../store/types.ts'
import { AttributingTransport, CallRegistry, type InputMethod } from './call-attribution.ts'
import type { InflightCall } from './inflight-call.ts'
import type { UpstreamHttp } from './http-dispatcher.ts'
import { ListenStream } from './listen-stream.ts'
import { sessionLimits } from './response-limit.ts'
import { createTransport } from './transport-factory.ts'
import type { SessionCredentials } from './credentials/credentialed-requests.ts'
import { sessionIdOf } from './client-ref.ts'
import { UpstreamInbound } from './upstream-inbound.ts'
import { ignoreWithTrace } from '../observability/ignored.ts'
import type { StreamableHttpTransport, StreamableHttpTransportOptions } from './streamable-http-transport.ts'

export type ListKind = 'tools' | 'prompts' | 'resources'

/** What an upstream session reports to its upstream. */
export interface SessionEvents {
  onListChanged (session: UpstreamSession, kind: ListKind): void
  onResourceUpdated (session: UpstreamSession, params: JsonObject): void
  /** A request of the upstream that belongs to no call: its client may still answer it. */
  onOrphanRequest (session: UpstreamSession, method: InputMethod, params: JsonObject, signal: AbortSignal): Promise<JsonObject>
  /** A notification (log message) that belongs to no call. */
  onOrphanNotification (session: UpstreamSession, method: string, params: JsonObject): void
  /** A 2026-07-28 result without `resultType` arrived, and was taken as complete. */
  onResultWithoutType (session: UpstreamSession): void
  onClosed (session: UpstreamSession): void
}

export interface SessionOpenOptions {
  /** The session's name in its upstream's registry (the client key, or a shared key). */
  key: string
  config: UpstreamConfig
  http: UpstreamHttp | undefined
  capabilities: ClientCapabilities
  signature: string
  /** Sessions with the same list key list the same entries when new (see Upstream.listKeyOf). */
  listKey: string
  /** A caller's own Authorization header, sent instead of the configured one from the handshake on (forwardAuthorization). */
  authorization: string | undefined
  events: SessionEvents
  log: Logger
  prior: PriorDiscovery | undefined
  /** Gives up the connect (the upstream is closing). */
  signal?: AbortSignal | undefined
  /** An upstream session another gateway process opened, to use again without a handshake (Streamable HTTP). */
  rejoin?: StreamableHttpTransportOptions['rejoin']
  /** `upstreams[].credentials`, and whom the session serves: each of its HTTP requests gets its headers from them. */
  credentials?: SessionCredentials | undefined
}

/** Where an upstream session can be reached from another gateway process: what a TaskResume records of it. */
export type SessionAddress = ResumeAddress

export interface SessionRequestOptions {
  timeout: number
  signal?: AbortSignal | undefined
  /** The call this request belongs to: what the upstream sends while it runs goes to the call's sink. */
  call?: InflightCall | undefined
  onprogress?: ((progress: JsonObject) => void) | undefined
  /** The caller's own Authorization header, sent instead of the configured one (forwardAuthorization). */
  authorization?: string | undefined
  /** Return a 2026-07-28 `input_required` result instead of failing on it (the caller answers it). */
  allowInputRequired?: boolean
  /** The span the request is made for (tracing on): the request gets a client span under it, passed on upstream. */
  trace?: TraceParent | undefined
  /** Streamable HTTP: hears where the request's response stream could be replayed from (see resumption-token.ts). */
  onResumptionToken?: ((token: string) => void) | undefined
  /** Streamable HTTP: instead of sending the request, replay the response stream of the one the token names. */
  resumptionToken?: string | undefined
}

const passthrough = z.looseObject({})

/**
 * One upstream session: an SDK client over its own connection (a spawned process for stdio, an
 * `Mcp-Session-Id` for Streamable HTTP, an SSE connection), declaring the capabilities of the client it
 * serves. Its calls, lists and reads are multiplexed by JSON-RPC id; what the upstream sends during a
 * call goes to that call (see CallRegistry), the rest to the session's client.
 */
export class UpstreamSession {
  readonly key: string
  readonly client: Client
  readonly capabilities: ClientCapabilities
  readonly signature: string
  readonly listKey: string
  /** The caller's Authorization header the session was opened with (forwardAuthorization), if any. */
  readonly authorization: string | undefined
  readonly calls = new CallRegistry()
  readonly #log: Logger
  readonly #config: UpstreamConfig
  /** When the session was last used (a request, or a hold released). */
  lastUsedAt = Date.now()
  /** No call ran on it yet: what it lists is what any new session with its capabilities lists. */
  pristine = true
  /** Its client is gone: the session closes once nothing holds it. */
  ended = false
  #holds = 0
  #closed = false
  #probing = false
  #closing: Promise<void> | undefined
  /** 2026-07-28 upstreams: the stream their list changes come on. */
  #lists: ListenStream | undefined
  /** The session's Streamable HTTP transport (undefined for stdio and SSE). */
  #http: StreamableHttpTransport | undefined
  /** What the upstream sends its client, and the tasks the gateway runs for the upstream on the client's behalf. */
  #inbound: UpstreamInbound | undefined

  private constructor (options: SessionOpenOptions, client: Client) {
    this.key = options.key
    this.client = client
    this.capabilities = options.capabilities
    this.signature = options.signature
    this.listKey = options.listKey
    this.authorization = options.authorization
    this.#log = options.log
    this.#config = options.config
  }

  /** The upstream's logger, for what is done on this session and not awaited (a cancel nobody waits for). */
  get log (): Logger {
    return this.#log
  }

  static async open (options: SessionOpenOptions): Promise<UpstreamSession> {
    const { config, capabilities, events, log } = options
    const client = new Client(
      GATEWAY_INFO,
      { capabilities, versionNegotiation: { mode: config.transport === 'sse' ? 'legacy' : config.era }, inputRequired: { autoFulfill: false } },
    )
    const session = new UpstreamSession(options, client)
    session.#inbound = new UpstreamInbound(session, events)
    session.#inbound.install()
    const created = createTransport(config, options.http, {
      onStderr: (line) => log.info({ stderr: line }, 'upstream stderr'),
      limits: sessionLimits(config.maxResponseBytes, session.calls, log, options.key),
      log,
    }, options.authorization, options.rejoin, options.credentials)
    session.#http = created.http
    const transport = new AttributingTransport(
      created.transport,
      session.calls,
      created.delayResponses,
      (response) => session.#completeResult(events, response),
    )
    // Over Streamable HTTP what is not on a call's stream is the session's, and a 2025-era client has a session
    // stream to get it on: no guesses. (A 2026-07-28 client can be asked only during a call: it gets the guess.)
    session.calls.exactOnly = created.transport.hasPerRequestStream === true && sessionIdOf(options.key) !== undefined
    client.onclose = () => {
      session.#closed = true
      session.#inbound?.clientTasks.close()
      events.onClosed(session)
    }
    client.onerror = (err) => {
      log.debug({ err: err.message }, 'upstream transport error')
      session.#checkAlive(Math.min(5000, config.timeouts.connect))
    }
    // Closing the transport fails a connect under way (the SDK does not watch the signal while it probes the era).
    const giveUp = (): void => { transport.close().catch(ignoreWithTrace(log, 'closing a transport to end its connect failed; the connect fails either way')) }
    options.signal?.addEventListener('abort', giveUp, { once: true })
    try {
      options.signal?.throwIfAborted()
      // A rejoined session with an id is attached as it is: the SDK makes no handshake on a transport that has one.
      const prior = options.rejoin?.sessionId == null ? options.prior : undefined
      await client.connect(transport, { timeout: config.timeouts.connect, ...(prior && { prior }) })
    } catch (err) {
      session.#closed = true
      await client.close().catch(ignoreWithTrace(log, 'closing a session whose connect failed failed too; the connect\'s error is the one reported'))
      throw err
    } finally {
      options.signal?.removeEventListener('abort', giveUp)
    }
    if (client.getProtocolEra?.() === 'modern' && options.rejoin === undefined) session.#lists = await ListenStream.forListChanges(client, config.timeouts.connect, log, session.key)
    return session
  }

  /**
   * Where another gateway process can reach this session again: undefined when it cannot (stdio and SSE
   * sessions end with the process that opened them).
   */
  address (): SessionAddress | undefined {
    const http = this.#http
    const protocolVersion = this.client.getNegotiatedProtocolVersion?.() ?? http?.protocolVersion
    if (http === undefined || protocolVersion === undefined || this.#closed) return undefined
    return { sessionId: http.sessionId ?? null, protocolVersion, era: this.client.getProtocolEra?.() === 'modern' ? '2026-07-28' : '2025-11-25' }
  }

  /** Answers a request the upstream sent (perhaps to another gateway process, which stopped) under its own id. */
  async respond (id: string | number, answer: { result: JsonObject } | { error: WireError }): Promise<void> {
    const transport = this.client.transport
    if (transport === undefined) throw new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', [this.key, 'its session is closed'])
    await transport.send({ jsonrpc: '2.0', id, ...answer } as never)
  }

  /**
   * Another gateway process goes on with an upstream task of this session: whenever this one closes, the
   * session is left open upstream (no DELETE).
   */
  keepUpstream (): void {
    this.#http?.keepSession()
  }

  /** Closes the session here but leaves it open upstream (no DELETE), for the tasks another process adopts. */
  async detach (): Promise<void> {
    this.#closed = true
    await this.#http?.detach()
    await this.close()
  }

  get closed (): boolean {
    return this.#closed
  }

  /** The upstream speaks 2026-07-28 and offers the tasks extension: it may answer a tools/call with a task of its own. */
  get offersTasks (): boolean {
    if (this.client.getProtocolEra?.() !== 'modern') return false
    const extensions = this.client.getServerCapabilities()?.extensions as JsonObject | undefined
    return extensions?.[TASKS_EXTENSION] !== undefined
  }

  /** Calls, tasks and subscriptions holding the session open. */
  get holds (): number {
    return this.#holds
  }

  /** Keeps the session open until the returned function is called (once). */
  hold (): () => void {
    this.#holds++
    let released = false
    return () => {
      if (released) return
      released = true
      this.#holds--
      this.lastUsedAt = Date.now()
    }
  }

  /**
   * Sends any request and returns the upstream's result object untouched. A traced request carries its
   * span's context in `params._meta` (every transport) and in the `traceparent` header (HTTP).
   */
  async request (method: string, params: JsonObject | undefined, options: SessionRequestOptions): Promise<JsonObject> {
    if (options.trace === undefined) return await this.#send(method, params, options, undefined)
    const tracing = options.trace.tracing
    const { span, carrier } = tracing.upstream(options.trace, this.#config, method, params)
    let result: JsonObject
    try {
      result = await this.#send(method, withTraceMeta(params, carrier), options, { ...carrier })
    } catch (err) {
      tracing.upstreamEnded(span, undefined, err)
      throw err
    }
    tracing.upstreamEnded(span, result)
    return result
  }

  async #send (
    method: string,
    params: JsonObject | undefined,
    options: SessionRequestOptions,
    traceHeaders: Record<string, string> | undefined,
  ): Promise<JsonObject> {
    this.lastUsedAt = Date.now()
    const request = params === undefined ? { method } : { method, params }
    const auth = options.authorization === undefined ? traceHeaders : { ...traceHeaders, authorization: options.authorization }
    const headers = this.calls.headers(options.call, auth)
    const sdkOptions: RequestOptions = {
      timeout: options.timeout,
      ...(options.signal && { signal: options.signal }),
      ...(options.onprogress && { onprogress: options.onprogress as unknown as RequestOptions['onprogress'] }),
      ...(headers && { headers }),
      ...(options.allowInputRequired === true && { allowInputRequired: true }),
      ...(options.onResumptionToken && { onresumptiontoken: options.onResumptionToken }),
      ...(options.resumptionToken !== undefined && { resumptionToken: options.resumptionToken }),
    }
    return await this.client.request(request, passthrough, sdkOptions) as JsonObject
  }

  /**
   * Subscribes to updates of resource `uri` in the upstream's own way: `resources/subscribe` (2025 era), or
   * a `subscriptions/listen` stream for that URI (2026-07-28, which has no `resources/subscribe`). Updates
   * reach the session's events either way. An upstream that does not offer subscriptions (no
   * `resources.subscribe`) is not asked. Returns what ends the subscription.
   */
  async subscribeResource (uri: string, timeout: number): Promise<(timeout: number) => Promise<void>> {
    this.lastUsedAt = Date.now()
    if (this.client.getServerCapabilities()?.resources?.subscribe !== true) {
      // Nothing to ask: the upstream sends no updates of its resources, so none can be missed.
      this.#log.info({ session: this.key, uri }, 'upstream offers no resource subscriptions: subscription accepted, no updates will come')
      return async () => {}
    }
    if (this.client.getProtocolEra?.() !== 'modern') {
      await this.request('resources/subscribe', { uri }, { timeout })
      return async (unsubscribeTimeout) => {
        if (!this.#closed) await this.request('resources/unsubscribe', { uri }, { timeout: unsubscribeTimeout })
      }
    }
    const stream = await ListenStream.open(this.client, { resourceSubscriptions: [uri] }, timeout, this.#log)
    if (stream.honored.resourceSubscriptions?.includes(uri) !== true) {
      await stream.close()
      throw new Error(`it did not agree to send updates of '${uri}' on a subscriptions/listen stream`)
    }
    return async () => { await stream.close() }
  }

  async notify (method: string, params?: JsonObject): Promise<void> {
    await this.client.notification(params === undefined ? { method } : { method, params })
  }

  close (): Promise<void> {
    this.#closed = true
    this.#inbound?.clientTasks.close()
    const closed = this.client.close().catch(ignoreWithTrace(this.#log, 'an upstream session did not close cleanly; it is dropped either way', { session: this.key }))
    this.#closing ??= Promise.all([this.#lists?.close(), closed]).then(() => {})
    return this.#closing
  }

  /**
   * The SDK fails a request whose 2026-07-28 result lacks `resultType`. Servers on early SDKs leave it out of
   * complete results: such a result is taken as `complete` (what the spec says of results from servers of
   * earlier protocols) and reported, so the operator learns that the upstream is wrong.
   */
  #completeResult (events: SessionEvents, response: JsonObject): void {
    const result = response.result
    if (this.client.getProtocolEra?.() !== 'modern' || result === null || typeof result !== 'object' || Array.isArray(result) || 'resultType' in result) return
    (result as JsonObject).resultType = 'complete'
    events.onResultWithoutType(this)
  }

  /**
   * A transport error may mean the upstream is gone while a request waits for an answer that will never
   * come (a dropped HTTP stream does not fail pending requests). A ping (`server/discover` in the
   * 2026-07-28 era) tells: if it fails, the session is closed, which fails whatever was pending on it.
   */
  #checkAlive (timeout: number): void {
    if (this.#closed || this.#probing) return
    this.#probing = true
    // The 2026-07-28 protocol has no ping: its discovery request tells as much.
    const probe = this.client.getProtocolEra?.() === 'modern' ? this.client.discover({ timeout }) : this.client.ping({ timeout })
    probe.then(
      () => {
        this.#probing = false
        this.#log.debug({ session: this.key }, 'upstream answered its aliveness check; session kept')
      },
      () => {
        this.#probing = false
        void this.close()
      },
    )
  }
}
