import type { JsonObject } from '../wire/jsonrpc.ts'
import type { UpstreamSession } from '../upstream/upstream-session.ts'
import type { TaskSupport } from '../config/schema.ts'
import { exposedName } from '../config/name-filter.ts'

/** One entry of an upstream's list as the gateway exposes it, and the upstream's own key for it. */
export interface SnapshotItem {
  entry: JsonObject
  target: string
  /** Tools only: what the gateway advertises, and what the upstream itself declared. */
  taskSupport?: TaskSupport
  nativeTaskSupport?: TaskSupport
}

/** What one upstream session listed at its last refresh, already filtered and renamed. */
export interface UpstreamSnapshot {
  tools: SnapshotItem[]
  prompts: SnapshotItem[]
  resources: SnapshotItem[]
  resourceTemplates: SnapshotItem[]
  hasTools: boolean
  hasPrompts: boolean
  hasResources: boolean
}

type Filter = (name: string) => boolean

/** Upper bound of pages read from one upstream list, against a server that never stops paginating. */
const MAX_PAGES = 1000

async function readAll (session: UpstreamSession, method: string, key: string, timeout: number): Promise<JsonObject[]> {
  const items: JsonObject[] = []
  let cursor: string | undefined
  for (let page = 0; page < MAX_PAGES; page++) {
    const result = await session.request(method, cursor === undefined ? undefined : { cursor }, { timeout })
    const list = result[key]
    if (Array.isArray(list)) items.push(...list.filter((i): i is JsonObject => i !== null && typeof i === 'object'))
    cursor = typeof result.nextCursor === 'string' && result.nextCursor !== '' ? result.nextCursor : undefined
    if (cursor === undefined) break
  }
  return items
}

function renamed (items: JsonObject[], prefix: string, filter: Filter): SnapshotItem[] {
  return items
    .filter((item) => typeof item.name === 'string' && filter(item.name))
    .map((item) => {
      const target = item.name as string
      return { entry: { ...item, name: exposedName(prefix, target) }, target }
    })
}

function byUri (items: JsonObject[], key: 'uri' | 'uriTemplate', filter: Filter): SnapshotItem[] {
  return items
    .filter((item) => typeof item[key] === 'string' && filter(typeof item.name === 'string' ? item.name : item[key] as string))
    .map((item) => ({ entry: item, target: item[key] as string }))
}

function nativeSupport (tool: JsonObject): TaskSupport | undefined {
  const execution = tool.execution as JsonObject | undefined
  const value = execution?.taskSupport
  return value === 'optional' || value === 'required' || value === 'forbidden' ? value : undefined
}

/** Tools as the gateway advertises them: `execution.taskSupport` rewritten to the gateway's policy. */
function withTaskPolicy (items: SnapshotItem[], tools: JsonObject[], policy: (name: string) => TaskSupport): SnapshotItem[] {
  const byName = new Map(tools.map((t) => [t.name, t]))
  return items.map((item) => {
    const taskSupport = policy(item.target)
    const execution = { ...(item.entry.execution as JsonObject | undefined), taskSupport }
    const nativeTaskSupport = nativeSupport(byName.get(item.target) ?? {})
    return { ...item, entry: { ...item.entry, execution }, taskSupport, ...(nativeTaskSupport && { nativeTaskSupport }) }
  })
}

export async function fetchSnapshot (
  session: UpstreamSession,
  prefix: string,
  filters: { tools: Filter, prompts: Filter, resources: Filter },
  timeout: number,
  taskPolicy: (name: string) => TaskSupport,
): Promise<UpstreamSnapshot> {
  const capabilities = session.client.getServerCapabilities() ?? {}
  const hasTools = capabilities.tools !== undefined
  const hasPrompts = capabilities.prompts !== undefined
  const hasResources = capabilities.resources !== undefined
  const [tools, prompts, resources, templates] = await Promise.all([
    hasTools ? readAll(session, 'tools/list', 'tools', timeout) : [],
    hasPrompts ? readAll(session, 'prompts/list', 'prompts', timeout) : [],
    hasResources ? readAll(session, 'resources/list', 'resources', timeout) : [],
    hasResources ? readAll(session, 'resources/templates/list', 'resourceTemplates', timeout).catch(() => []) : [],
  ])
  return {
    tools: withTaskPolicy(renamed(tools, prefix, filters.tools), tools, taskPolicy),
    prompts: renamed(prompts, prefix, filters.prompts),
    resources: byUri(resources, 'uri', filters.resources),
    resourceTemplates: byUri(templates, 'uriTemplate', filters.resources),
    hasTools,
    hasPrompts,
    hasResources,
  }
}
