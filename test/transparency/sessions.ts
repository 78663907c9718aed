// Connects the scripted client of one era to a server, directly or through the gateway, and records what the
// client receives: every inbound message as it arrived (before the SDK reads it), the names of the HTTP response
// headers, and each server→client request with the deterministic answer the client gave.
import { Client as V2Client, StreamableHTTPClientTransport as V2Http } from '@modelcontextprotocol/client'
import { StdioClientTransport as V2Stdio } from '@modelcontextprotocol/client/stdio'
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport as V1Stdio } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport as V1Http } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { sampleObject } from './arguments.ts'
import type { DirectTarget, SideSetup } from './servers.ts'

type Json = Record<string, unknown>

/** 2025-11-25: an SDK v1 client with a session; 2026-07-28: an SDK v2 client (pinned to it through the gateway). */
export type Era = '2025-11-25' | '2026-07-28'
export const ERAS: readonly Era[] = ['2025-11-25', '2026-07-28']

/** The calls the script makes, the same for both SDKs (their clients have these methods with these shapes). */
export interface ScriptSession {
  capabilities: () => unknown
  instructions: () => unknown
  serverInfo: () => unknown
  request: (method: string, params: Json, onProgress?: (progress: Json) => void) => Promise<Json>
}

export interface RecordedSession {
  session: ScriptSession
  /** Every JSON-RPC message the client received, in order. */
  inbound: Json[]
  /** Names of the HTTP response headers the client received (empty over stdio). */
  headerNames: Set<string>
  /** Each server→client request: its method and params, as the client's handler saw them. */
  asked: Array<{ method: string, params: unknown }>
  /** The SDK v1 client of a 2025-11-25 session (its task API runs tools as tasks). */
  v1?: V1Client
  close: () => Promise<void>
}

/** What a host built on either SDK declares: roots, sampling and form elicitation. */
const CAPABILITIES = { roots: { listChanged: true }, sampling: {}, elicitation: { form: {} } }
/**
 * Everything a 2025-11-25 client can declare: form and URL elicitation, and tasks for the server's requests
 * (mcpc declares them). Servers register some tools only for clients that declare these; the script lists the
 * tools such a client sees (it makes no call with it).
 */
const EVERY_CAPABILITY = {
  ...CAPABILITIES,
  elicitation: { form: {}, url: {} },
  tasks: { list: {}, cancel: {}, requests: { sampling: { createMessage: {} }, elicitation: { create: {} } } },
}
const SAMPLED = { role: 'assistant', content: { type: 'text', text: 'sampled by the script' }, model: 'transparency-model' }

interface Recordable { start: () => Promise<void>, onmessage?: ((message: never, extra?: never) => void) | undefined }

/** Wraps the transport's message handler (set by the SDK in connect(), before start()) to record every message. */
function recordInbound<T extends Recordable> (transport: T, inbound: Json[]): T {
  const start = transport.start.bind(transport)
  transport.start = async () => {
    const handler = transport.onmessage as ((message: unknown, extra?: unknown) => void) | undefined
    transport.onmessage = ((message: Json, extra?: unknown) => {
      inbound.push(structuredClone(message))
      handler?.(message, extra)
    }) as never
    await start()
  }
  return transport
}

function recordingFetch (headerNames: Set<string>): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init)
    for (const name of response.headers.keys()) headerNames.add(name)
    return response
  }
}

function answers (side: SideSetup, asked: RecordedSession['asked']) {
  return {
    roots: (params: unknown) => {
      asked.push({ method: 'roots/list', params })
      return { roots: side.roots }
    },
    sample: (params: unknown) => {
      asked.push({ method: 'sampling/createMessage', params })
      return SAMPLED
    },
    elicit: (params: unknown) => {
      asked.push({ method: 'elicitation/create', params })
      const schema = ((params as Json | undefined)?.requestedSchema ?? {}) as Json
      return { action: 'accept', content: sampleObject(schema) }
    },
  }
}

/**
 * Connects the client of `era`. Directly, the 2026-07-28 client negotiates as its SDK does by default against a
 * server that has no 2026-07-28 (the 2025 handshake); through the gateway it is pinned to 2026-07-28.
 */
export async function connectScripted (
  era: Era, target: DirectTarget, side: SideSetup, viaGateway: boolean, everyCapability = false,
): Promise<RecordedSession> {
  const inbound: Json[] = []
  const headerNames = new Set<string>()
  const asked: RecordedSession['asked'] = []
  const answer = answers(side, asked)
  const info = { name: 'transparency-script', version: '1.0.0' }
  if (era === '2025-11-25') {
    const client = new V1Client(info, { capabilities: everyCapability ? EVERY_CAPABILITY : CAPABILITIES })
    client.setRequestHandler(ListRootsRequestSchema, (request) => answer.roots(request.params) as never)
    client.setRequestHandler(CreateMessageRequestSchema, (request) => answer.sample(request.params) as never)
    client.setRequestHandler(ElicitRequestSchema, (request) => answer.elicit(request.params) as never)
    const transport = target.kind === 'http'
      ? new V1Http(new URL(target.url), { fetch: recordingFetch(headerNames) })
      : new V1Stdio({ command: target.command, args: target.args, env: { ...minimalEnv(), ...target.env }, stderr: 'ignore' })
    await client.connect(recordInbound(transport, inbound))
    const session: ScriptSession = {
      capabilities: () => client.getServerCapabilities(),
      instructions: () => client.getInstructions(),
      serverInfo: () => client.getServerVersion(),
      request: async (method, params, onProgress) => await requestOf(client as unknown as SdkClient, method, params, async () =>
        await client.callTool(params as never, undefined, onProgress && { onprogress: onProgress as never }) as Json),
    }
    return { session, inbound, headerNames, asked, v1: client, close: () => client.close() }
  }
  const client = new V2Client(info, { capabilities: CAPABILITIES, versionNegotiation: { mode: viaGateway ? { pin: '2026-07-28' } : 'legacy' } })
  client.setRequestHandler('roots/list', (request) => answer.roots(request.params) as never)
  client.setRequestHandler('sampling/createMessage', (request) => answer.sample(request.params) as never)
  client.setRequestHandler('elicitation/create', (request) => answer.elicit(request.params) as never)
  const transport = target.kind === 'http'
    ? new V2Http(new URL(target.url), { fetch: recordingFetch(headerNames) })
    : new V2Stdio({ command: target.command, args: target.args, env: { ...minimalEnv(), ...target.env }, stderr: 'ignore' })
  await client.connect(recordInbound(transport, inbound))
  const session: ScriptSession = {
    capabilities: () => client.getServerCapabilities(),
    instructions: () => client.getInstructions(),
    serverInfo: () => client.getServerVersion(),
    request: async (method, params, onProgress) => await requestOf(client as unknown as SdkClient, method, params, async () =>
      await client.callTool(params as never, onProgress === undefined ? undefined : { onprogress: onProgress as never }) as Json),
  }
  return { session, inbound, headerNames, asked, close: () => client.close() }
}

/** The environment a client gives a server it spawns: the SDK's default (what the gateway gives its stdio upstreams too). */
function minimalEnv (): Record<string, string> {
  const keep = ['HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER']
  return Object.fromEntries(keep.flatMap((key) => process.env[key] === undefined ? [] : [[key, process.env[key] as string]]))
}

/** The methods both SDKs' clients have, with the same parameters (tools/call differs in where its options go). */
interface SdkClient {
  listTools: (params: Json) => Promise<Json>
  listPrompts: (params: Json) => Promise<Json>
  getPrompt: (params: Json) => Promise<Json>
  listResources: (params: Json) => Promise<Json>
  listResourceTemplates: (params: Json) => Promise<Json>
  readResource: (params: Json) => Promise<Json>
  complete: (params: Json) => Promise<Json>
  setLoggingLevel: (level: string) => Promise<Json>
  subscribeResource: (params: Json) => Promise<Json>
  unsubscribeResource: (params: Json) => Promise<Json>
}

async function requestOf (client: SdkClient, method: string, params: Json, callTool: () => Promise<Json>): Promise<Json> {
  switch (method) {
    case 'tools/list': return await client.listTools(params)
    case 'tools/call': return await callTool()
    case 'prompts/list': return await client.listPrompts(params)
    case 'prompts/get': return await client.getPrompt(params)
    case 'resources/list': return await client.listResources(params)
    case 'resources/templates/list': return await client.listResourceTemplates(params)
    case 'resources/read': return await client.readResource(params)
    case 'completion/complete': return await client.complete(params)
    case 'logging/setLevel': return await client.setLoggingLevel(String(params.level))
    case 'resources/subscribe': return await client.subscribeResource(params)
    case 'resources/unsubscribe': return await client.unsubscribeResource(params)
    default: throw new Error(`the script has no ${method}`)
  }
}
