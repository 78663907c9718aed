import { upstreamPrefix } from '../config/schema.ts'
import { PREFIX_SEPARATOR } from '../config/name-filter.ts'
import type { Upstream } from '../upstream/upstream.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'

/**
 * What the gateway says about itself in a handshake, in neither era's shape: the server capabilities of the
 * upstreams (without tasks, which each era adds in its own dialect) and the instructions for the client.
 */
export interface ServerProfile {
  readonly capabilities: ServerFeatures
  readonly instructions: string | undefined
}

/** The server capabilities of the merged namespace; a key is absent when no upstream offers it. */
export interface ServerFeatures {
  readonly tools: { listChanged: true }
  readonly prompts?: { listChanged: true }
  readonly resources?: { subscribe?: true, listChanged: true }
  readonly completions?: JsonObject
  readonly logging?: JsonObject
}

/** `server.instructions`: a text that replaces the upstreams' own, `false` for none, undefined for theirs. */
export type InstructionsSetting = string | false | undefined

function has (capabilities: JsonObject, key: string): boolean {
  return capabilities[key] !== undefined && capabilities[key] !== null
}

/**
 * The union of what the configured upstreams announced when they last connected (one never connected yet
 * counts for nothing). Tools are always announced: `tools/list` always answers and the gateway's tasks are
 * tool calls. `listChanged` is announced for every list: the gateway itself tells clients of a change when an
 * upstream comes, goes or is reloaded, whether or not the upstream announces changes of its own.
 */
export function serverFeatures (upstreams: readonly Upstream[]): ServerFeatures {
  const offers = upstreams.flatMap((upstream) => upstream.offered === undefined ? [] : [upstream.offered.capabilities])
  const any = (key: string): boolean => offers.some((capabilities) => has(capabilities, key))
  const subscribe = offers.some((capabilities) => (capabilities.resources as JsonObject | undefined)?.subscribe === true)
  return {
    tools: { listChanged: true },
    ...(any('prompts') && { prompts: { listChanged: true } }),
    ...(any('resources') && { resources: { ...(subscribe && { subscribe: true }), listChanged: true } }),
    ...(any('completions') && { completions: {} }),
    ...(any('logging') && { logging: {} }),
  }
}

/** The heading of one upstream's instructions among several: its name, and how its tools and prompts are named. */
function heading (upstream: Upstream): string {
  const prefix = upstreamPrefix(upstream.config)
  return prefix === '' ? `## ${upstream.name}` : `## ${upstream.name} (its tools and prompts are named ${prefix}${PREFIX_SEPARATOR}…)`
}

/**
 * The instructions a client gets: `setting` when it is a text, none when it is false; else those of the
 * upstreams that give some (and are not configured `instructions: false`). With one upstream configured, its
 * text unchanged; with several, each one's text under a `## <name>` heading, in the order of the configuration.
 */
export function combinedInstructions (upstreams: readonly Upstream[], setting: InstructionsSetting): string | undefined {
  if (setting !== undefined) return setting === false ? undefined : setting
  const given = upstreams.filter((upstream) => upstream.config.instructions && (upstream.offered?.instructions ?? '') !== '')
  if (given.length === 0) return undefined
  if (upstreams.length === 1) return given[0]!.offered!.instructions
  return given.map((upstream) => `${heading(upstream)}\n\n${upstream.offered!.instructions!}`).join('\n\n')
}

/** What the gateway announces now, for the configured upstreams (a reload changes the array in place). */
export function serverProfile (upstreams: readonly Upstream[], setting: InstructionsSetting): ServerProfile {
  return { capabilities: serverFeatures(upstreams), instructions: combinedInstructions(upstreams, setting) }
}

/**
 * An optional server capability. A method of one is refused with -32601 while no upstream offers it, as a
 * server without it answers; each revision's method registry declares which capability a method belongs to.
 */
export type OptionalCapability = 'prompts' | 'resources' | 'subscriptions' | 'completions' | 'logging'

const OFFERED: Readonly<Record<OptionalCapability, (features: ServerFeatures) => boolean>> = {
  prompts: (f) => f.prompts !== undefined,
  resources: (f) => f.resources !== undefined,
  subscriptions: (f) => f.resources?.subscribe === true,
  completions: (f) => f.completions !== undefined,
  logging: (f) => f.logging !== undefined,
}

/** Whether `features` offer `capability`. */
export function offersCapability (features: ServerFeatures, capability: OptionalCapability): boolean {
  return OFFERED[capability](features)
}
