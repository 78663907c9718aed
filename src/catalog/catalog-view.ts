import { UriTemplate } from '@modelcontextprotocol/client'
import type { Access } from '../auth/access.ts'
import { upstreamPrefix, type TaskSupport } from '../config/schema.ts'
import { GatewayError } from '../errors.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import type { Upstream } from '../upstream/upstream.ts'
import { compileFilter, PREFIX_SEPARATOR } from '../config/name-filter.ts'
import type { UpstreamSnapshot } from './snapshot.ts'

export type CatalogKind = 'tools' | 'prompts' | 'resources' | 'resourceTemplates'

/** Where a name or URI of the merged namespace leads. */
export interface Route {
  upstream: Upstream
  /** The upstream's own name (tools, prompts) or the URI (resources). */
  target: string
  entry: JsonObject | undefined
  /** Tools: the task support the gateway advertises (its policy) and the one the upstream declared. */
  taskSupport: TaskSupport
  nativeTaskSupport: TaskSupport | undefined
  /** No upstream lists the name: it leads to the upstream that owns its part of the namespace, which answers for it. */
  unlisted?: true
}

export interface Collision {
  kind: CatalogKind
  name: string
  first: string
  second: string
}

/** An upstream a reload removed: what it last listed, so that its names get a precise error. */
export interface RemovedUpstream {
  prefix: string
  snapshot: UpstreamSnapshot | undefined
}

/** One upstream's part of a view: the lists its session for the client shows. */
export interface ViewPart {
  upstream: Upstream
  snapshot: UpstreamSnapshot
}

const KINDS: readonly CatalogKind[] = ['tools', 'prompts', 'resources', 'resourceTemplates']
const KEY_OF: Record<CatalogKind, string> = { tools: 'name', prompts: 'name', resources: 'uri', resourceTemplates: 'uriTemplate' }

function allows (access: Access, kind: CatalogKind, upstream: string, name: string): boolean {
  return kind === 'tools' ? access.tool(upstream, name) : access.upstream(upstream)
}

/** Whether an upstream's `tools`, `prompts` or `resources` filter lets a name through (compiled once per filter). */
const FILTERS = new WeakMap<object, (name: string) => boolean>()
function passes (upstream: Upstream, kind: 'tools' | 'prompts' | 'resources', name: string): boolean {
  const filter = upstream.config[kind]
  let test = FILTERS.get(filter)
  if (test === undefined) {
    test = compileFilter(filter)
    FILTERS.set(filter, test)
  }
  return test(name)
}

/**
 * The merged namespace as one client sees it: tools and prompts carry their upstream's prefix, resource
 * URIs pass through unchanged; the first upstream (in configuration order) to offer a name keeps it.
 * A name of an upstream that is not part of the view (it is down) gets "unavailable", not "unknown".
 */
export class CatalogView {
  readonly collisions: readonly Collision[]
  readonly #upstreams: readonly Upstream[]
  readonly #lastKnown: (upstream: string) => UpstreamSnapshot | undefined
  readonly #parts: readonly ViewPart[]
  readonly #lists: Record<CatalogKind, JsonObject[]> = { tools: [], prompts: [], resources: [], resourceTemplates: [] }
  readonly #routes: Record<CatalogKind, Map<string, Route>> = {
    tools: new Map(),
    prompts: new Map(),
    resources: new Map(),
    resourceTemplates: new Map(),
  }

  readonly #templates: Array<{ template: UriTemplate, route: Route }> = []
  /** Filtered lists by the grants that filtered them (a reload of the permissions compiles new grants). */
  readonly #filtered = new WeakMap<Access, Map<CatalogKind, readonly JsonObject[]>>()
  readonly #removed: ReadonlyMap<string, RemovedUpstream>

  /** `upstreams`: every configured upstream; `lastKnown`: what a down upstream last listed; `removed`: by name. */
  constructor (
    parts: readonly ViewPart[],
    upstreams: readonly Upstream[],
    lastKnown: (upstream: string) => UpstreamSnapshot | undefined,
    removed: ReadonlyMap<string, RemovedUpstream> = new Map(),
  ) {
    this.#parts = parts
    this.#upstreams = upstreams
    this.#lastKnown = lastKnown
    this.#removed = removed
    const collisions: Collision[] = []
    for (const { upstream, snapshot } of parts) {
      for (const kind of KINDS) {
        for (const item of snapshot[kind]) {
          const key = String(item.entry[KEY_OF[kind]])
          const existing = this.#routes[kind].get(key)
          if (existing) {
            collisions.push({ kind, name: key, first: existing.upstream.name, second: upstream.name })
            continue
          }
          const route: Route = { upstream, target: item.target, entry: item.entry, taskSupport: item.taskSupport ?? 'forbidden', nativeTaskSupport: item.nativeTaskSupport }
          this.#routes[kind].set(key, route)
          this.#lists[kind].push(item.entry)
          if (kind === 'resourceTemplates') this.#templates.push({ template: new UriTemplate(key), route })
        }
      }
    }
    this.collisions = collisions
  }

  /** The entries of one kind that `access` may see. */
  list (kind: CatalogKind, access: Access): readonly JsonObject[] {
    if (access.all) return this.#lists[kind]
    let lists = this.#filtered.get(access)
    if (lists === undefined) {
      lists = new Map()
      this.#filtered.set(access, lists)
    }
    let list = lists.get(kind)
    if (!list) {
      list = this.#lists[kind].filter((entry) => {
        const name = String(entry[KEY_OF[kind]])
        return allows(access, kind, this.#routes[kind].get(name)!.upstream.name, name)
      })
      lists.set(kind, list)
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
    // Resource URIs carry no prefix: an unlisted one belongs to the only upstream of the view that offers resources.
    const withResources = this.#parts.filter((p) => p.snapshot.hasResources)
    const owner = withResources.length === 1 ? withResources[0]!.upstream : undefined
    if (owner !== undefined && access.upstream(owner.name) && passes(owner, 'resources', uri)) return unlistedRoute(owner, uri)
    return this.#missing('resources', uri, access)
  }

  /** The upstream owning a resource template, by its exact uriTemplate. */
  resourceTemplate (uriTemplate: string, access: Access): Route {
    return this.#visible('resourceTemplates', this.#routes.resourceTemplates.get(uriTemplate), uriTemplate, access)
  }

  /** A route `access` may use; one it may not is reported exactly like one that does not exist, and is never forwarded. */
  #visible (kind: CatalogKind, route: Route | undefined, name: string, access: Access): Route {
    if (route === undefined && (kind === 'tools' || kind === 'prompts')) return this.#unlisted(kind, name, access)
    if (route && allows(access, kind, route.upstream.name, name)) return route
    const refused = route === undefined ? undefined : access.refusal?.(route.upstream.name)
    if (refused !== undefined) throw refused
    return this.#missing(kind, name, access)
  }

  /**
   * A tool or prompt name no upstream lists goes to the upstream owning the name (see #owner), which answers
   * for it as it does without the gateway, when the upstream's filter and the caller's permissions allow the
   * name there; any other is the gateway's own error.
   */
  #unlisted (kind: 'tools' | 'prompts', name: string, access: Access): Route {
    const owner = this.#owner(name)
    const refused = owner === undefined ? undefined : access.refusal?.(owner.name)
    if (refused !== undefined) throw refused
    const forwarded = owner !== undefined && allows(access, kind, owner.name, name) && passes(owner, kind, name)
    if (!forwarded) return this.#missing(kind, name, access)
    const down = !this.#parts.some((p) => p.upstream === owner)
    if (down) throw new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', [owner.name, owner.lastError ?? owner.state])
    return unlistedRoute(owner, name)
  }

  /**
   * The upstream owning an unlisted tool or prompt name: the only configured upstream that passes its names
   * through (`prefix: ''`), unless the name starts with another upstream's `<prefix>__`.
   */
  #owner (name: string): Upstream | undefined {
    let owner: Upstream | undefined
    for (const upstream of this.#upstreams) {
      const prefix = upstreamPrefix(upstream.config)
      if (prefix !== '' && name.startsWith(prefix + PREFIX_SEPARATOR)) return undefined
      if (prefix !== '') continue
      if (owner !== undefined) return undefined
      owner = upstream
    }
    return owner
  }

  /** Unknown name: if it belongs to an upstream that is down (and `access` may use), say so; otherwise it does not exist. */
  #missing (kind: CatalogKind, name: string, access: Access): never {
    for (const upstream of this.#upstreams) {
      if (upstream.state === 'ready' || this.#parts.some((p) => p.upstream === upstream) || !allows(access, kind, upstream.name, name)) continue
      const prefix = upstreamPrefix(upstream.config)
      const known = this.#lastKnown(upstream.name)?.[kind].some((item) => String(item.entry[KEY_OF[kind]]) === name) ?? false
      if (known || (prefix !== '' && (kind === 'tools' || kind === 'prompts') && name.startsWith(prefix + PREFIX_SEPARATOR))) {
        throw new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', [upstream.name, upstream.lastError ?? upstream.state])
      }
    }
    for (const [upstream, { prefix, snapshot }] of this.#removed) {
      if (!allows(access, kind, upstream, name)) continue
      const known = snapshot?.[kind].some((item) => String(item.entry[KEY_OF[kind]]) === name) ?? false
      if (known || (prefix !== '' && (kind === 'tools' || kind === 'prompts') && name.startsWith(prefix + PREFIX_SEPARATOR))) {
        throw new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', [upstream, 'a configuration reload removed it'])
      }
    }
    if (kind === 'tools') throw new GatewayError('GW_ERR_TOOL_NOT_FOUND', [name])
    if (kind === 'prompts') throw new GatewayError('GW_ERR_PROMPT_NOT_FOUND', [name])
    throw new GatewayError('GW_ERR_RESOURCE_NOT_FOUND', [name], { data: { uri: name } })
  }
}

function unlistedRoute (upstream: Upstream, target: string): Route {
  return { upstream, target, entry: undefined, taskSupport: 'forbidden', nativeTaskSupport: undefined, unlisted: true }
}

export function describeCollisions (collisions: readonly Collision[]): string {
  const lines = collisions.map((c) => `  - ${c.kind} '${c.name}' is offered by upstream '${c.first}' and by upstream '${c.second}'`)
  return `name collisions in the merged catalog (give one of the upstreams a prefix for tools and prompts; deny the entry for resources and templates):\n${lines.join('\n')}`
}
