import { randomBytes } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import type { Caller } from '../auth/access.ts'
import { HeldExchanges } from '../auth/held-exchanges.ts'
import { GatewayError } from '../errors.ts'
import { SseConnection, type SseSettings } from './sse-connection.ts'
import type { Logger } from '../observability/logger.ts'
import { BUS, publishOn, subscribeTo } from '../store/bus-channels.ts'
import type { SignalBus } from '../store/types.ts'
import type { RpcMessage, RpcRequest, JsonObject } from '../wire/jsonrpc.ts'
import { isListChanged, listChangeAnsweredBy, ListChangeCoalescer } from '../wire/list-changes.ts'
import { EventStream, parseEventId } from './event-stream.ts'

/** How long a finished request stream stays resumable. */
const FINISHED_RETENTION_MS = 60_000

export interface StreamHubOptions extends SseSettings {
  /** Held SSE connections (see `StreamHub`) one session may have open at once in this process. */
  streamsPerSession: number
  log: Logger
}

/**
 * The SSE streams this process holds, per session. Messages addressed to a session (list changes,
 * resource updates, later task status) are published on the store's bus, so whichever process holds
 * the session's GET stream delivers them; each message goes out on exactly one stream.
 *
 * It also writes every SSE connection, and bounds the ones a session holds on purpose: GET streams and
 * POST exchanges opened as streams before their first message (a `tasks/result` wait, a modern
 * `subscriptions/listen`, whose session is `modern:<principal>`). One more is refused with
 * GW_ERR_STREAM_LIMIT before anything is written.
 */
export class StreamHub {
  readonly #bus: SignalBus
  readonly #options: StreamHubOptions
  readonly #streams = new Map<string, EventStream>()
  readonly #standalone = new Map<string, EventStream[]>()
  readonly #subscriptions = new Map<string, () => void>()
  /** The open held connections, per session. */
  readonly #held = new Map<string, Set<SseConnection>>()
  /** A session hears of a kind of list change once until it lists again (see ListChangeCoalescer). */
  readonly #listChanges = new ListChangeCoalescer({ untilListed: true })
  /** Called when a session opens a new standalone GET stream (to offer it what is waiting). */
  onGetStream: ((sessionId: string) => void) | undefined
  /** Called when a server→client request goes out on a standalone GET stream (to know where an input is offered). */
  onRequestSent: ((request: RpcRequest, stream: EventStream) => void) | undefined
  /** Every stream and held exchange of this process with the credential it was opened with (revocation). */
  readonly exchanges: HeldExchanges

  constructor (bus: SignalBus, options: StreamHubOptions, exchanges = new HeldExchanges()) {
    this.#bus = bus
    this.#options = options
    this.exchanges = exchanges
  }

  /**
   * A new stream for the response to one POSTed request, written on `res`. `held`: the request waits
   * on it on purpose, so it counts against the session's limit (and may be refused, see `StreamHub`).
   */
  openRequestStream (sessionId: string, res: ServerResponse, headers: Record<string, string>, held: boolean): EventStream {
    const connection = this.#connect(sessionId, res, headers, held ? {} : undefined)
    const stream = new EventStream(randomBytes(9).toString('base64url'), sessionId, 'request')
    this.#streams.set(stream.id, stream)
    stream.attach(connection)
    return stream
  }

  /** Marks a request stream done; it stays resumable for a while. */
  finishRequestStream (stream: EventStream): void {
    stream.finish()
    setTimeout(() => this.#streams.delete(stream.id), FINISHED_RETENTION_MS).unref()
  }

  /**
   * Serves a GET on `res`: resumes the stream named by Last-Event-ID when this process holds it, else
   * opens a standalone stream that receives the session's server-initiated messages. A held connection:
   * one the session may not have beyond its limit (resuming a stream frees the connection it replaces).
   * The connection lasts as long as `caller`'s credential: revoked, it is closed (see HeldExchanges), and
   * nothing the session is sent after that goes on it.
   */
  openGetStream (
    sessionId: string,
    res: ServerResponse,
    lastEventId: string | undefined,
    headers: Record<string, string>,
    caller: Caller,
  ): EventStream {
    const resume = parseEventId(lastEventId)
    const existing = resume && this.#streams.get(resume.streamId)
    if (existing && existing.sessionId === sessionId) {
      const wasAttached = existing.attached
      const connection = this.#connect(sessionId, res, headers, { replacing: existing.connection })
      existing.attach(connection, resume.seq)
      // A replay its client did not read may have closed the connection already.
      if (existing.kind === 'standalone' && !wasAttached && existing.attached) this.#addStandalone(existing)
      this.#holdWhileOpen(sessionId, connection, caller)
      return existing
    }
    const stream = new EventStream(randomBytes(9).toString('base64url'), sessionId, 'standalone')
    this.#streams.set(stream.id, stream)
    const connection = this.#connect(sessionId, res, headers, {})
    stream.attach(connection)
    this.#addStandalone(stream)
    // Last: a credential revoked as the stream opened closes it at once, and the stream detaches as usual.
    this.#holdWhileOpen(sessionId, connection, caller)
    this.#options.log.debug({ sessionId }, 'opened a standalone stream')
    this.onGetStream?.(sessionId)
    return stream
  }

  /**
   * Writes the SSE head on `res`. With `held`, the connection counts against the session's limit until
   * it closes, and is refused (nothing written) when the session already holds that many, not counting
   * `held.replacing`, which the new one is about to close.
   */
  #connect (
    sessionId: string,
    res: ServerResponse,
    headers: Record<string, string>,
    held: { replacing?: SseConnection | undefined } | undefined,
  ): SseConnection {
    const { log, streamsPerSession, keepAliveMs, stallTimeoutMs, bufferBytes } = this.#options
    if (held) {
      const holding = this.#held.get(sessionId)
      const count = (holding?.size ?? 0) - (held.replacing !== undefined && holding?.has(held.replacing) === true ? 1 : 0)
      if (count >= streamsPerSession) {
        log.debug({ sessionId, limit: streamsPerSession }, 'refused an SSE stream over limits.streamsPerSession')
        throw new GatewayError('GW_ERR_STREAM_LIMIT', [streamsPerSession])
      }
    }
    const connection = new SseConnection(res, {
      keepAliveMs,
      stallTimeoutMs,
      bufferBytes,
      headers,
      onStalled: (reason, unreadBytes) => log.warn({ sessionId, reason, unreadBytes }, 'closed an SSE stream whose client stopped reading it'),
    })
    if (!held) return connection
    const holding = this.#held.get(sessionId) ?? new Set<SseConnection>()
    this.#held.set(sessionId, holding)
    holding.add(connection)
    connection.onClose(() => {
      holding.delete(connection)
      if (holding.size === 0 && this.#held.get(sessionId) === holding) this.#held.delete(sessionId)
    })
    return connection
  }

  /** Registers a GET connection with the credential of its request: revoked, the connection ends (its stream detaches). */
  #holdWhileOpen (sessionId: string, connection: SseConnection, caller: Caller): void {
    const release = this.exchanges.hold(caller, (err) => {
      this.#options.log.info({ sessionId, reason: err.message }, 'closed an SSE stream whose credential was revoked or expired')
      connection.end()
    })
    connection.onClose(release)
  }

  #addStandalone (stream: EventStream): void {
    const list = this.#standalone.get(stream.sessionId) ?? []
    list.push(stream)
    this.#standalone.set(stream.sessionId, list)
    this.#ensureSubscribed(stream.sessionId)
    stream.onDetach(() => this.#dropStandalone(stream))
  }

  /** Publishes a message for a session; the process holding its GET stream sends it. Resolves with how many processes hold one. */
  async publish (sessionId: string, message: RpcMessage): Promise<number> {
    return await publishOn(this.#bus, BUS.session, sessionId, { message: message as unknown as JsonObject })
  }

  /**
   * Delivers on the newest standalone stream of the session held here; false when there is none. List
   * changes are gathered for a moment first, and one the session was told of is not told again until it
   * has read that list (`listed`), so a session hears of one change once however late its copies arrive.
   */
  deliverLocal (sessionId: string, message: RpcMessage): boolean {
    if (!this.hasStandalone(sessionId)) return false
    if ('method' in message && !('id' in message) && isListChanged(message.method)) {
      const method = message.method
      const outcome = this.#listChanges.schedule(sessionId, method, () => {
        const stream = this.#standalone.get(sessionId)?.at(-1)
        if (stream === undefined) return false
        stream.send(message)
        this.#options.log.debug({ sessionId, method }, 'sent a list change')
        return true
      })
      this.#options.log.debug({ sessionId, method, outcome }, 'list change for a session')
      return true
    }
    const stream = this.#standalone.get(sessionId)!.at(-1)!
    // Told first: whoever is told knows where the request is before its client can have seen it.
    if ('method' in message && 'id' in message) this.onRequestSent?.(message, stream)
    stream.send(message)
    return true
  }

  /**
   * The session is reading a list (`tools/list`, …): its next change of that kind is told. Call it before the
   * list is read, so a change after the read is never held back. When another process holds the session's
   * GET stream, it is told over the bus (settles once the bus took it: ahead of any later list change).
   */
  async listed (sessionId: string, listMethod: string): Promise<void> {
    const kind = listChangeAnsweredBy(listMethod)
    if (kind === undefined) return
    if (this.hasStandalone(sessionId)) {
      this.#listChanges.listed(sessionId, kind)
      return
    }
    await publishOn(this.#bus, BUS.session, sessionId, { listed: kind }).catch((err: unknown) => {
      this.#options.log.warn({ err, sessionId }, 'could not tell the process holding the session\'s stream that it listed')
    })
  }

  /** Sends to every session with a standalone stream in this process (catalog list changes). */
  broadcastLocal (message: RpcMessage): void {
    for (const sessionId of this.#standalone.keys()) this.deliverLocal(sessionId, message)
  }

  hasStandalone (sessionId: string): boolean {
    return (this.#standalone.get(sessionId)?.length ?? 0) > 0
  }

  /** Ends every stream of a session (DELETE or expiry). */
  closeSession (sessionId: string): void {
    for (const stream of [...this.#streams.values()]) {
      if (stream.sessionId !== sessionId) continue
      stream.finish()
      this.#streams.delete(stream.id)
    }
    this.#standalone.delete(sessionId)
    this.#listChanges.forget(sessionId)
    this.#subscriptions.get(sessionId)?.()
    this.#subscriptions.delete(sessionId)
  }

  closeAll (): void {
    for (const sessionId of new Set([...this.#streams.values()].map((s) => s.sessionId))) this.closeSession(sessionId)
  }

  get size (): number {
    return this.#streams.size
  }

  #ensureSubscribed (sessionId: string): void {
    if (this.#subscriptions.has(sessionId)) return
    const unsubscribe = subscribeTo(this.#bus, BUS.session, sessionId, (payload) => {
      if ('listed' in payload) this.#listChanges.listed(sessionId, payload.listed)
      else this.deliverLocal(sessionId, payload.message as unknown as RpcMessage)
    })
    this.#subscriptions.set(sessionId, unsubscribe)
  }

  #dropStandalone (stream: EventStream): void {
    const list = this.#standalone.get(stream.sessionId)
    if (!list) return
    const index = list.indexOf(stream)
    if (index >= 0) list.splice(index, 1)
    setTimeout(() => {
      if (!stream.attached) this.#streams.delete(stream.id)
    }, FINISHED_RETENTION_MS).unref()
    if (list.length === 0) {
      this.#standalone.delete(stream.sessionId)
      // What the lost stream carried may not have reached the client: its next list change is told.
      this.#listChanges.forget(stream.sessionId)
      this.#subscriptions.get(stream.sessionId)?.()
      this.#subscriptions.delete(stream.sessionId)
    }
  }
}
