/**
 * Prompts, resources, resource templates, completions and resource
 * subscriptions of the demo upstream.
 *
 * - prompt `greeting(name)` — `name` completes from a fixed list of names
 * - resource `demo://readme` — static markdown text (plus a revision line
 *   that `touch_resource` bumps)
 * - template `demo://items/{id}` — ids 1..5 are listed, `id` completes
 *   from them; unknown ids answer "resource not found"
 * - `resources/subscribe` / `resources/unsubscribe` — tracked per session
 *   ({@link DemoSession}); `touch_resource` notifies the subscribed sessions
 */
import { ResourceNotFoundError, ResourceTemplate, completable, type McpServer } from '@modelcontextprotocol/server'
import * as z from 'zod'
import type { DemoSession, DemoWorld } from './demo-world.ts'

export const README_URI = 'demo://readme'
export const ITEM_URI_TEMPLATE = 'demo://items/{id}'

const GREETING_NAMES = ['Ada', 'Alan', 'Alice', 'Bob', 'Carol', 'Grace', 'Linus', 'Margaret']

const ITEMS: ReadonlyMap<string, { name: string, description: string }> = new Map([
  ['1', { name: 'apple', description: 'A red fruit.' }],
  ['2', { name: 'banana', description: 'A yellow fruit.' }],
  ['3', { name: 'cherry', description: 'A small stone fruit.' }],
  ['4', { name: 'date', description: 'A sweet desert fruit.' }],
  ['5', { name: 'elderberry', description: 'A dark purple berry.' }],
])

const README_TEXT = [
  '# Demo upstream',
  '',
  'This MCP server ships with the gateway as a demo upstream.',
  'Tools: slow, echo, ask_user, ask_url, summarize, list_roots, fail_tool,',
  'throw_error, touch_resource, toggle_extra_tool (and extra when toggled on).',
  'Prompt: greeting(name). Resources: demo://readme, demo://items/{id}.',
].join('\n')

function completeFrom (values: Iterable<string>, prefix: string): string[] {
  const lower = prefix.toLowerCase()
  return [...values].filter((value) => value.toLowerCase().startsWith(lower))
}

/** Registers the greeting prompt, the readme and items resources and the subscription handlers. */
export function registerDemoPromptsAndResources (mcp: McpServer, world: DemoWorld, session: DemoSession): void {
  mcp.registerPrompt('greeting', {
    title: 'Greeting',
    description: 'Asks the model to greet someone by name. The name argument supports completion.',
    argsSchema: z.object({
      name: completable(z.string().describe('Who to greet.'), (value) => completeFrom(GREETING_NAMES, value)),
    }),
  }, ({ name }) => ({
    description: `Greeting for ${name}`,
    messages: [{ role: 'user', content: { type: 'text', text: `Please write a warm, one-sentence greeting for ${name}.` } }],
  }))

  mcp.registerResource('readme', README_URI, {
    title: 'Demo README',
    description: 'What this demo upstream offers.',
    mimeType: 'text/markdown',
  }, (uri) => ({
    contents: [{ uri: uri.href, mimeType: 'text/markdown', text: `${README_TEXT}\n\nrevision: ${world.revision(README_URI)}\n` }],
  }))

  const template = new ResourceTemplate(ITEM_URI_TEMPLATE, {
    list: () => ({
      resources: [...ITEMS].map(([id, item]) => ({
        uri: `demo://items/${id}`,
        name: `item-${id}`,
        title: item.name,
        mimeType: 'application/json',
      })),
    }),
    complete: { id: (value) => completeFrom(ITEMS.keys(), value) },
  })
  mcp.registerResource('item', template, {
    title: 'Demo item',
    description: 'One demo item by id (1..5), as JSON.',
    mimeType: 'application/json',
  }, (uri, variables) => {
    const raw = variables['id']
    const id = Array.isArray(raw) ? raw[0] : raw
    const item = id === undefined ? undefined : ITEMS.get(id)
    if (id === undefined || item === undefined) throw new ResourceNotFoundError(uri.href, `No demo item at ${uri.href}`)
    const body = { id, ...item, revision: world.revision(uri.href) }
    return { contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(body) }] }
  })

  const server = mcp.server
  server.registerCapabilities({ resources: { subscribe: true } })
  server.setRequestHandler('resources/subscribe', (request) => {
    session.subscribe(request.params.uri)
    return {}
  })
  server.setRequestHandler('resources/unsubscribe', (request) => {
    session.unsubscribe(request.params.uri)
    return {}
  })
}
