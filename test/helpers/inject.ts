import type { FastifyInstance } from 'fastify'

type Json = Record<string, unknown>

/** What `postRpc` returns: the HTTP status and headers, and the JSON-RPC message that answers the request. */
export interface InjectedReply {
  status: number
  headers: Record<string, string | string[] | number | undefined>
  /** The JSON body, or on an SSE answer the message with the request's id (the last message when the request has none). */
  body: Json
}

/** The headers a Streamable HTTP client sends with every POST. */
export const MCP_POST_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }

/** The messages of an SSE body that has ended, in order. */
export function sseMessages (text: string): Json[] {
  const messages: Json[] = []
  for (const block of text.split('\n\n')) {
    const data = block.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(5).replace(/^ /, '')).join('\n')
    if (data !== '') messages.push(JSON.parse(data) as Json)
  }
  return messages
}

/**
 * POSTs one JSON-RPC message (an object, or a string sent as it is) to the gateway's app through `inject()`,
 * no socket involved, and parses the reply: a JSON body, or an SSE answer read to its end.
 */
export async function postRpc (app: FastifyInstance, message: Json | string, headers: Record<string, string> = {}, url = '/mcp'): Promise<InjectedReply> {
  const res = await app.inject({ method: 'POST', url, headers: { ...MCP_POST_HEADERS, ...headers }, payload: typeof message === 'string' ? message : JSON.stringify(message) })
  const reply = { status: res.statusCode, headers: res.headers }
  if (!String(res.headers['content-type'] ?? '').includes('text/event-stream')) return { ...reply, body: res.body === '' ? {} : res.json<Json>() }
  const messages = sseMessages(res.body)
  const id = typeof message === 'string' ? undefined : message.id
  const answer = id === undefined ? messages.at(-1) : messages.find((m) => m.id === id)
  if (answer === undefined) throw new Error(`no answer in the SSE body: ${res.body}`)
  return { ...reply, body: answer }
}

/** A legacy-era initialize through `inject()`, with an optional bearer token. */
export async function injectInitialize (app: FastifyInstance, token: string | undefined, headers: Record<string, string> = {}, url = '/mcp'): Promise<InjectedReply> {
  const params = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } }
  return await postRpc(app, { jsonrpc: '2.0', id: 1, method: 'initialize', params }, { ...(token !== undefined && { authorization: `Bearer ${token}` }), ...headers }, url)
}

/** The WWW-Authenticate challenge of a reply ('' without one). */
export function challengeOf (reply: InjectedReply): string {
  return String(reply.headers['www-authenticate'] ?? '')
}
