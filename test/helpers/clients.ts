import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  type ClientCapabilities,
  type CreateMessageResult,
  type ElicitResult,
  type ListRootsResult,
} from '@modelcontextprotocol/sdk/types.js'

export interface V1ClientOptions {
  capabilities?: ClientCapabilities
  onElicit?: (params: Record<string, unknown>) => ElicitResult | Promise<ElicitResult>
  onSample?: (params: Record<string, unknown>) => CreateMessageResult | Promise<CreateMessageResult>
  onRoots?: () => ListRootsResult
}

/** A real v1 SDK client (the client most deployed 2025-era hosts are built on) connected to `url`. */
export async function connectV1 (url: string, options: V1ClientOptions = {}): Promise<Client> {
  const capabilities: ClientCapabilities = options.capabilities ?? {
    ...(options.onElicit && { elicitation: { form: {}, url: {} } }),
    ...(options.onSample && { sampling: {} }),
    ...(options.onRoots && { roots: { listChanged: true } }),
  }
  const client = new Client({ name: 'e2e-v1', version: '1.0.0' }, { capabilities })
  if (options.onElicit) {
    const onElicit = options.onElicit
    client.setRequestHandler(ElicitRequestSchema, async (request) => await onElicit(request.params as Record<string, unknown>))
  }
  if (options.onSample) {
    const onSample = options.onSample
    client.setRequestHandler(CreateMessageRequestSchema, async (request) => await onSample(request.params as Record<string, unknown>))
  }
  if (options.onRoots) {
    const onRoots = options.onRoots
    client.setRequestHandler(ListRootsRequestSchema, async () => onRoots())
  }
  await client.connect(new StreamableHTTPClientTransport(new URL(url)))
  return client
}

export function textOf (result: unknown): string {
  const content = (result as { content?: Array<{ type: string, text?: string }> }).content ?? []
  return content.filter((c) => c.type === 'text').map((c) => c.text ?? '').join('\n')
}

/** Resolves when `predicate` holds, checking after every event the caller signals through `poke`. */
export function waitFor<T> (register: (resolve: (value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve) => register(resolve))
}
