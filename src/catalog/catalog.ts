import { UriTemplate } from '@modelcontextprotocol/client'
import type { Access } from '../auth/access.ts'
import { upstreamPrefix, type TaskSupport, type UpstreamConfig } from '../config/schema.ts'
import { GatewayError } from '../errors.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import type { UpstreamPool } from '../upstream/upstream-pool.ts'
import { compileFilter, exposedName, PREFIX_SEPARATOR } from './name-filter.ts'
import { fetchSnapshot, type UpstreamSnapshot } from './snapshot.ts'

export type ListKind = 'tools' | 'prompts' | 'resources' | 'resourceTemplates'

/** Where a name or URI of the merged namespace leads. */
export interface Route {
  pool: UpstreamPool
  /** The upstream's own name (tools, prompts) or the URI (resources). */
  target: string
  entry: JsonObject | undefined
  /** Tools: the task support the gateway advertises (its policy) and the one the upstream declared. */
  taskSupport: TaskSupport
  nativeTaskSupport: TaskSupport | undefined
}

export interface Collision {
  kind: ListKind
  name: string
  first: string
  second: string
}

const KEY_OF: Record<ListKind, string> = { tools: 'name', prompts: 'name', resources: 'uri', resourceTemplates: 'uriTemplate' }

/**
 * The merged namespace of every upstream: tools and prompts carry their upstream's prefix, resource
 * URIs pass through unchanged. Only ready upstreams are listed; what a down upstream last offered is
 * kept so that a call to it gets "unavailable" instead of "unknown".
 */
export class Catalog {
  readonly #pools: readonly UpstreamPool[]
  readonly #snapshots = new Map<string, UpstreamSnapshot>()
  #lists: Record<ListKind, JsonObject[]> = { tools: [], prompts: [], resources: [], resourceTemplates: [] }
  #routes: Record<ListKind, Map<string, Route>> = { tools: new Map(), prompts: new Map(), resources: new Map(), resourceTemplates: new Map() }
  #templates: Array<{ template: UriTemplate, route: Route }> = []
  #collisions: Collision[] = []
  /** Lists filtered for callers who may not see everything, by grants and kind; emptied on every rebuild. */
  #filtered = new Map<string, readonly JsonObject[]>()
  /** Grows on every rebuild; part of list cursors so a stale cursor is detected. */
  version = 0

  constructor (pools: readonly UpstreamPool[]) {
    this.#pools = pools
  }

  /** Re-reads the lists of one upstream from its shared connection and rebuilds the namespace. */
  async refresh (pool: UpstreamPool): Promise<Collision[]> {
    const connection = pool.shared()
    const filters = {
      tools: compileFilter(pool.config.tools),
      prompts: compileFilter(pool.config.prompts),
      resources: compileFilter(pool.config.resources),
    }
    const snapshot = await fetchSnapshot(connection, upstreamPrefix(pool.config), filters, pool.config.timeouts.request, (name) => taskPolicy(pool.config, name))
    this.#snapshots.set(pool.name, snapshot)
    return this.rebuild()
  }

  /** Rebuilds the merged lists from the snapshots of ready upstreams, in configuration order. */
  rebuild (): Collision[] {
    const lists: Record<ListKind, JsonObject[]> = { tools: [], prompts: [], resources: [], resourceTemplates: [] }
    const routes: Record<ListKind, Map<string, Route>> = { tools: new Map(), prompts: new Map(), resources: new Map(), resourceTemplates: new Map() }
    const templates: Array<{ template: UriTemplate, route: Route }> = []
    const collisions: Collision[] = []
    for (const pool of this.#pools) {
      const snapshot = this.#snapshots.get(pool.name)
      if (!snapshot || pool.state !== 'ready') continue
      for (const kind of Object.keys(lists) as ListKind[]) {
        for (const item of snapshot[kind]) {
          const key = String(item.entry[KEY_OF[kind]])
          const existing = routes[kind].get(key)
          if (existing) {
            collisions.push({ kind, name: key, first: existing.pool.name, second: pool.name })
            continue
          }
          const route: Route = { pool, target: item.target, entry: item.entry, taskSupport: item.taskSupport ?? 'forbidden', nativeTaskSupport: item.nativeTaskSupport }
          routes[kind].set(key, route)
          lists[kind].push(item.entry)
          if (kind === 'resourceTemplates') templates.push({ template: new UriTemplate(key), route })
        }
      }
    }
    this.#lists = lists
    this.#routes = routes
    this.#templates = templates
    this.#collisions = collisions
    this.#filtered = new Map()
    this.version++
    return collisions
  }

  get collisions (): readonly Collision[] {
    return this.#collisions
  }

  /** The entries of one kind that `access` may see. */
  list (kind: ListKind, access: Access): readonly JsonObject[] {
    if (access.all) return this.#lists[kind]
    const cacheKey = `${kind} ${access.key}`
    let list = this.#filtered.get(cacheKey)
    if (!list) {
      list = this.#lists[kind].filter((entry) => {
        const name = String(entry[KEY_OF[kind]])
        return allows(access, kind, this.#routes[kind].get(name)!.pool.name, name)
      })
      if (this.#filtered.size >= FILTERED_CACHE_LIMIT) this.#filtered.clear()
      this.#filtered.set(cacheKey, list)
    }
    return list
  }

  tool (name: string, access: Access): Route {
    return this.#visible('tools', this.#routes.tools.get(name), name, access)
  }

  prompt (name: string, access: Access): Route {
    return this.#visible('prompts', this.#routes.prompts.get(name), name, access)
  }

  /** The upstream that serves a URI: a listed resource, else the one whose template matches it. */
  resource (uri: string, access: Access): Route {
    const listed = this.#routes.resources.get(uri)
    if (listed) return this.#visible('resources', listed, uri, access)
    for (const { template, route } of this.#templates) {
      if (template.match(uri)) return this.#visible('resources', { ...route, target: uri, entry: undefined }, uri, access)
    }
    const withResources = this.#pools.filter((p) => p.state === 'ready' && this.#snapshots.get(p.name)?.hasResources && access.upstream(p.name))
    if (withResources.length === 1) return { pool: withResources[0]!, target: uri, entry: undefined, taskSupport: 'forbidden', nativeTaskSupport: undefined }
    return this.#missing('resources', uri, access)
  }

  /** The upstream owning a resource template, by its exact uriTemplate. */
  resourceTemplate (uriTemplate: string, access: Access): Route {
    return this.#visible('resourceTemplates', this.#routes.resourceTemplates.get(uriTemplate), uriTemplate, access)
  }

  /** A route `access` may use; one it may not is reported exactly like one that does not exist. */
  #visible (kind: ListKind, route: Route | undefined, name: string, access: Access): Route {
    if (route && allows(access, kind, route.pool.name, name)) return route
    return this.#missing(kind, name, access)
  }

  /** Whether the upstream itself declared the tool (by its own name) as task-only. */
  isNativeTask (upstream: string, tool: string): boolean {
    return this.#snapshots.get(upstream)?.tools.some((item) => item.target === tool && item.nativeTaskSupport === 'required') ?? false
  }

  /** Every ready upstream whose snapshot offers this kind of entry. */
  poolsWith (capability: 'hasResources' | 'hasPrompts' | 'hasTools'): UpstreamPool[] {
    return this.#pools.filter((p) => p.state === 'ready' && this.#snapshots.get(p.name)?.[capability] === true)
  }

  /** Unknown name: if it belongs to an upstream that is down (and `access` may use), say so; otherwise it does not exist. */
  #missing (kind: ListKind, name: string, access: Access): never {
    for (const pool of this.#pools) {
      if (pool.state === 'ready' || !allows(access, kind, pool.name, name)) continue
      const prefix = upstreamPrefix(pool.config)
      const snapshot = this.#snapshots.get(pool.name)
      const known = snapshot?.[kind].some((item) => String(item.entry[KEY_OF[kind]]) === name) ?? false
      if (known || (prefix !== '' && (kind === 'tools' || kind === 'prompts') && name.startsWith(prefix + PREFIX_SEPARATOR))) {
        throw new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', [pool.name, pool.lastError ?? pool.state])
      }
    }
    if (kind === 'tools') throw new GatewayError('GW_ERR_TOOL_NOT_FOUND', [name])
    if (kind === 'prompts') throw new GatewayError('GW_ERR_PROMPT_NOT_FOUND', [name])
    throw new GatewayError('GW_ERR_RESOURCE_NOT_FOUND', [name], { data: { uri: name } })
  }
}

/** Filtered lists kept at once (kinds × distinct sets of grants). */
const FILTERED_CACHE_LIMIT = 400

function allows (access: Access, kind: ListKind, upstream: string, name: string): boolean {
  return kind === 'tools' ? access.tool(upstream, name) : access.upstream(upstream)
}

/** The task support the gateway advertises for a tool: its own setting, else the upstream's. */
export function taskPolicy (config: UpstreamConfig, tool: string): TaskSupport {
  return config.toolSettings[tool]?.taskSupport ?? config.taskSupport
}

export function describeCollisions (collisions: readonly Collision[]): string {
  const lines = collisions.map((c) => `  - ${c.kind} '${c.name}' is offered by upstream '${c.first}' and by upstream '${c.second}'`)
  return `name collisions in the merged catalog (give one of the upstreams a prefix for tools and prompts; deny the entry for resources and templates):\n${lines.join('\n')}`
}

export { exposedName }
