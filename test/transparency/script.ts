// The scripted session: what a thorough client does with a server, each outcome kept as one item of the
// transcript under a path (`tools/call/echo`, `resources/read/demo://x`). Both sides of the comparison run the
// same script; the items are compared after normalisation (normalise.ts).
import { invalidArguments, sampleObject } from './arguments.ts'
import type { Era, ScriptSession } from './sessions.ts'

type Json = Record<string, unknown>

/** The outcome of one request: its result, or its error as a client sees it (code and message). */
export type Outcome = { result: unknown } | { error: { code?: unknown, message: string } }

export type Transcript = Map<string, unknown>

export interface ScriptOptions {
  era: Era
  /** Arguments of a tool where a value made from its schema would not do. */
  args: (tool: string) => Json | undefined
}

/** How many of the listed resources are read (the first ones). */
const READS = 8
/** Safety bound on the pages of one list. */
const MAX_PAGES = 50
const UNKNOWN = 'transparency-no-such-name'

async function outcome (run: () => Promise<unknown>): Promise<Outcome> {
  try {
    return { result: await run() }
  } catch (error) {
    const e = error as { code?: unknown, message?: unknown }
    return { error: { ...(e.code !== undefined && { code: e.code }), message: String(e.message) } }
  }
}

/** Every page of a list: the items (under `key`) and the number of pages, or the error of the first request. */
async function listAll (session: ScriptSession, method: string, key: string): Promise<{ items: Json[], pages: number } | Outcome> {
  const items: Json[] = []
  let cursor: string | undefined
  for (let pages = 1; pages <= MAX_PAGES; pages++) {
    const page = await outcome(() => session.request(method, cursor === undefined ? {} : { cursor }))
    if ('error' in page) return pages === 1 ? page : { error: { message: `page ${pages}: ${page.error.message}` } }
    const result = page.result as Json
    items.push(...(result[key] as Json[] | undefined ?? []))
    cursor = result.nextCursor as string | undefined
    if (cursor === undefined) return { items, pages }
  }
  return { error: { message: `more than ${MAX_PAGES} pages` } }
}

function byName (transcript: Transcript, prefix: string, list: { items: Json[], pages: number } | Outcome, field: string): Json[] {
  if (!('items' in list)) {
    transcript.set(prefix, list)
    return []
  }
  transcript.set(prefix, { names: list.items.map((item) => item[field]), pages: list.pages })
  for (const item of list.items) {
    // A tool's execution (taskSupport) is an item of its own: the gateway sets it by its task policy.
    const { execution, ...rest } = item
    transcript.set(`${prefix}/${String(item[field])}`, rest)
    if (execution !== undefined || prefix === 'tools/list') transcript.set(`${prefix}/${String(item[field])}#execution`, execution ?? null)
  }
  return list.items
}

/**
 * Keeps an outcome under `path`, with what is not the server's answer itself as items of their own: the
 * progress the client was given (`#progress`) and the caching hints of a 2026-07-28 result (`#cache`).
 */
function keep (t: Transcript, path: string, result: Outcome, progress: unknown[] = []): void {
  if (progress.length > 0) t.set(`${path}#progress`, progress)
  if (!('result' in result) || result.result === null || typeof result.result !== 'object') {
    t.set(path, result)
    return
  }
  const { ttlMs, cacheScope, ...rest } = result.result as Json
  if (ttlMs !== undefined || cacheScope !== undefined) t.set(`${path}#cache`, { ttlMs, cacheScope })
  t.set(path, { result: rest })
}

/** Runs the script and returns its transcript (requests made one after the other, in listing order). */
export async function runScript (session: ScriptSession, options: ScriptOptions): Promise<Transcript> {
  const t: Transcript = new Map()
  const capabilities = (session.capabilities() ?? {}) as Json
  for (const [key, value] of Object.entries(capabilities)) t.set(`initialize/capabilities/${key}`, value)
  t.set('initialize/instructions', session.instructions() ?? null)
  t.set('initialize/serverInfo', session.serverInfo())

  // Before the calls, so that what they change is told to the client: the log level, and a subscription to the
  // first resource listed. The 2026-07-28 protocol has neither (subscriptions/listen replaces subscribe).
  let subscribed: string | undefined
  if (options.era === '2025-11-25') {
    keep(t, 'logging/setLevel', await outcome(() => session.request('logging/setLevel', { level: 'debug' })))
    const first = await outcome(() => session.request('resources/list', {}))
    const listed = 'result' in first ? ((first.result as Json).resources as Json[] | undefined ?? [])[0]?.uri : undefined
    subscribed = typeof listed === 'string' ? listed : `file:///${UNKNOWN}`
    keep(t, 'resources/subscribe', await outcome(() => session.request('resources/subscribe', { uri: subscribed })))
  }

  const tools = byName(t, 'tools/list', await listAll(session, 'tools/list', 'tools'), 'name')
  for (const tool of tools) {
    const name = String(tool.name)
    const schema = (tool.inputSchema ?? {}) as Json
    const progress: unknown[] = []
    const valid = await outcome(() => session.request('tools/call', { name, arguments: options.args(name) ?? sampleObject(schema) }, (p) => {
      progress.push({ progress: p.progress, total: p.total, message: p.message })
    }))
    keep(t, `tools/call/${name}`, valid, progress)
    keep(t, `tools/call/${name}#invalid`, await outcome(() => session.request('tools/call', { name, arguments: invalidArguments(schema) })))
  }
  keep(t, `tools/call/${UNKNOWN}`, await outcome(() => session.request('tools/call', { name: UNKNOWN, arguments: {} })))

  const prompts = byName(t, 'prompts/list', await listAll(session, 'prompts/list', 'prompts'), 'name')
  for (const prompt of prompts) {
    const declared = (prompt.arguments ?? []) as Json[]
    const args = Object.fromEntries(declared.filter((a) => a.required === true).map((a) => [String(a.name), argumentValue(String(a.name))]))
    keep(t, `prompts/get/${String(prompt.name)}`, await outcome(() => session.request('prompts/get', { name: prompt.name, arguments: args })))
    for (const arg of declared) {
      const ref = { type: 'ref/prompt', name: prompt.name }
      keep(t, `completion/complete/prompt/${String(prompt.name)}/${String(arg.name)}`,
        await outcome(() => session.request('completion/complete', { ref, argument: { name: arg.name, value: '' } })))
    }
  }
  keep(t, `prompts/get/${UNKNOWN}`, await outcome(() => session.request('prompts/get', { name: UNKNOWN, arguments: {} })))

  const resources = byName(t, 'resources/list', await listAll(session, 'resources/list', 'resources'), 'uri')
  for (const resource of resources.slice(0, READS)) {
    keep(t, `resources/read/${String(resource.uri)}`, await outcome(() => session.request('resources/read', { uri: resource.uri })))
  }
  keep(t, `resources/read/${UNKNOWN}`, await outcome(() => session.request('resources/read', { uri: `file:///${UNKNOWN}` })))
  const templates = byName(t, 'resources/templates/list', await listAll(session, 'resources/templates/list', 'resourceTemplates'), 'uriTemplate')
  for (const template of templates) {
    const uriTemplate = String(template.uriTemplate)
    keep(t, `resources/read/${uriTemplate}`, await outcome(() => session.request('resources/read', { uri: uriTemplate.replace(/\{[^}]+\}/g, '1') })))
    for (const variable of uriTemplate.match(/\{([^}]+)\}/g) ?? []) {
      const name = variable.slice(1, -1)
      keep(t, `completion/complete/resource/${uriTemplate}/${name}`,
        await outcome(() => session.request('completion/complete', { ref: { type: 'ref/resource', uri: uriTemplate }, argument: { name, value: '' } })))
    }
  }

  if (subscribed !== undefined) keep(t, 'resources/unsubscribe', await outcome(() => session.request('resources/unsubscribe', { uri: subscribed })))
  return t
}

/** The tools a client that declares every capability sees (`every-capability/tools/list`: their names). */
export async function runListing (session: ScriptSession): Promise<Transcript> {
  const t: Transcript = new Map()
  const list = await listAll(session, 'tools/list', 'tools')
  t.set('every-capability/tools/list', 'items' in list ? list.items.map((tool) => tool.name) : list)
  return t
}

/** A value for a prompt argument: the servers' prompts take names, numbers and cities. */
function argumentValue (name: string): string {
  if (/id$/i.test(name)) return '1'
  if (/type$/i.test(name)) return 'Text'
  return name
}
