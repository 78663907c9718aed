import { createHash } from 'node:crypto'
import { Client, ProtocolError, type ClientCapabilities, type PriorDiscovery, type RequestOptions } from '@modelcontextprotocol/client'
import { z } from 'zod'
import type { UpstreamConfig } from '../config/schema.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { GatewayError, RpcError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import { createTransport } from './transport-factory.ts'
import type { UpstreamHttp } from './http-dispatcher.ts'

/** Server→client requests an upstream may send while a call runs. */
export const INPUT_METHODS = ['elicitation/create', 'sampling/createMessage', 'roots/list'] as const
export type InputMethod = typeof INPUT_METHODS[number]

const CAPABILITY_OF: Record<InputMethod, 'elicitation' | 'sampling' | 'roots'> = {
  'elicitation/create': 'elicitation',
  'sampling/createMessage': 'sampling',
  'roots/list': 'roots',
}

/** Where a leased connection sends what the upstream asks of the downstream client during one call. */
export interface CallSink {
  input (method: InputMethod, params: JsonObject, signal: AbortSignal): Promise<JsonObject>
  notify (method: string, params: JsonObject): void
}

export interface ConnectionEvents {
  onListChanged (kind: 'tools' | 'prompts' | 'resources'): void
  onResourceUpdated (params: JsonObject): void
  onClosed (connection: UpstreamConnection): void
}

const passthrough = z.looseObject({})

/** The client capabilities an upstream connection declares: exactly those the downstream client has. */
export function mirrorCapabilities (downstream: JsonObject | undefined): ClientCapabilities {
  const mirrored: JsonObject = {}
  for (const key of ['elicitation', 'sampling', 'roots'] as const) {
    const value = downstream?.[key]
    if (value !== undefined && value !== null && typeof value === 'object') mirrored[key] = value
  }
  return mirrored as ClientCapabilities
}

/**
 * What makes two connections interchangeable: the capabilities they declare and, for an upstream that
 * is sent each caller's own Authorization header, that header (as a hash: signatures are compared, not kept).
 */
export function connectionSignature (capabilities: ClientCapabilities, authorization?: string): string {
  const declared = JSON.stringify(capabilities, Object.keys(capabilities).sort())
  return authorization === undefined ? declared : `${declared} ${createHash('sha256').update(authorization).digest('base64url')}`
}

/** One SDK client connection to one upstream: a spawned process for stdio, an MCP session for HTTP. */
export class UpstreamConnection {
  readonly client: Client
  readonly signature: string
  #sink: CallSink | undefined
  #closed = false
  #probing = false
  #closing: Promise<void> | undefined
  lastUsedAt = Date.now()

  private constructor (client: Client, signature: string) {
    this.client = client
    this.signature = signature
  }

  static async open (options: {
    config: UpstreamConfig
    http: UpstreamHttp | undefined
    capabilities: ClientCapabilities
    events: ConnectionEvents
    log: Logger
    prior: PriorDiscovery | undefined
    /** The caller's own Authorization header, sent instead of the configured one (forwardAuthorization). */
    authorization?: string
  }): Promise<UpstreamConnection> {
    const { config, capabilities, events, log, authorization } = options
    const client = new Client(
      { name: 'mcp-task-gateway', version: '0.1.0' },
      { capabilities, versionNegotiation: { mode: config.transport === 'sse' ? 'legacy' : config.era } },
    )
    const connection = new UpstreamConnection(client, connectionSignature(capabilities, authorization))
    connection.#install(capabilities, events)
    const transport = createTransport(config, options.http, {
      onStderr: (line) => log.info({ stderr: line }, 'upstream stderr'),
    }, authorization)
    client.onclose = () => {
      connection.#closed = true
      events.onClosed(connection)
    }
    client.onerror = (err) => {
      log.debug({ err: err.message }, 'upstream transport error')
      connection.#checkAlive(Math.min(5000, config.timeouts.connect))
    }
    try {
      await client.connect(transport, { timeout: config.timeouts.connect, ...(options.prior && { prior: options.prior }) })
    } catch (err) {
      connection.#closed = true
      await client.close().catch(() => {})
      throw err
    }
    return connection
  }

  get closed (): boolean {
    return this.#closed
  }

  /** Binds the connection to one call: its input requests and notifications go to the sink. */
  bind (sink: CallSink | undefined): void {
    this.#sink = sink
    this.lastUsedAt = Date.now()
  }

  /** Sends any request and returns the upstream's result object untouched. */
  async request (method: string, params: JsonObject | undefined, options: RequestOptions): Promise<JsonObject> {
    const request = params === undefined ? { method } : { method, params }
    return await this.client.request(request, passthrough, options) as JsonObject
  }

  async notify (method: string, params?: JsonObject): Promise<void> {
    await this.client.notification(params === undefined ? { method } : { method, params })
  }

  close (): Promise<void> {
    this.#closed = true
    this.#closing ??= this.client.close().catch(() => {})
    return this.#closing
  }

  /**
   * A transport error may mean the upstream is gone while a request waits for an answer that will never
   * come (a dropped HTTP stream does not fail pending requests). A ping tells: if it fails, the
   * connection is closed, which fails whatever was pending on it.
   */
  #checkAlive (timeout: number): void {
    if (this.#closed || this.#probing) return
    this.#probing = true
    this.client.ping({ timeout }).then(
      () => { this.#probing = false },
      () => {
        this.#probing = false
        void this.close()
      },
    )
  }

  #install (capabilities: ClientCapabilities, events: ConnectionEvents): void {
    const client = this.client
    for (const method of INPUT_METHODS) {
      if (!(CAPABILITY_OF[method] in capabilities)) continue
      client.setRequestHandler(method, async (request, ctx) => {
        const sink = this.#sink
        if (!sink) throw new ProtocolError(-32603, `no call is in progress on this connection to answer ${method}`)
        try {
          return await sink.input(method, (request.params ?? {}) as JsonObject, ctx.mcpReq.signal) as never
        } catch (err) {
          if (err instanceof RpcError || err instanceof GatewayError) throw new ProtocolError(err.rpcCode, err.message, err.data)
          throw err
        }
      })
    }
    client.fallbackRequestHandler = async (request, ctx) => {
      const capability = (CAPABILITY_OF as Record<string, string | undefined>)[request.method]
      if (!capability) throw new ProtocolError(-32601, `Method not found: ${request.method}`)
      // Sent although this connection did not declare the capability: the call's sink decides (and tells
      // its client what was missing); the upstream gets a clear error either way.
      const sink = this.#sink
      if (sink) {
        try {
          return await sink.input(request.method as InputMethod, (request.params ?? {}) as JsonObject, ctx.mcpReq.signal)
        } catch (err) {
          if (err instanceof RpcError || err instanceof GatewayError) throw new ProtocolError(err.rpcCode, err.message, err.data)
          throw err
        }
      }
      throw new ProtocolError(-32601, `the downstream client did not declare the '${capability}' capability, so '${request.method}' cannot be relayed to it`)
    }
    client.setNotificationHandler('notifications/tools/list_changed', () => events.onListChanged('tools'))
    client.setNotificationHandler('notifications/prompts/list_changed', () => events.onListChanged('prompts'))
    client.setNotificationHandler('notifications/resources/list_changed', () => events.onListChanged('resources'))
    client.setNotificationHandler('notifications/resources/updated', (n) => events.onResourceUpdated(n.params as JsonObject))
    client.setNotificationHandler('notifications/message', (n) => this.#sink?.notify(n.method, n.params as JsonObject))
    client.fallbackNotificationHandler = async (n) => {
      if (n.method === 'notifications/tasks/status') this.#sink?.notify(n.method, (n.params ?? {}) as JsonObject)
    }
  }
}
