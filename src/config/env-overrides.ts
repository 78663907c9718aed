import { parseDocument } from 'yaml'
import { z } from 'zod'
import { formatPath, typed, type ConfigProblem, type Env, type Interpolated } from './interpolate.ts'
import { configSchema } from './schema.ts'
import { readSecretFile } from './secret-file.ts'

/**
 * Any option from the environment, over the YAML file (the naming rule is in docs/configuration.md):
 *
 *   GATEWAY_SERVER__PORT=9000            server.port
 *   GATEWAY_TASKS__DECIDE__AFTER=2s      tasks.decide.after
 *   GATEWAY_UPSTREAMS__0__URL=…          upstreams[0].url, by index
 *   GATEWAY_UPSTREAMS__WEB_SEARCH__URL   upstreams[i].url of the upstream named web-search (or web_search)
 *   GATEWAY_SERVER__STATE_SECRET_FILE    server.stateSecret, from the file the variable names
 *
 * A variable is read when its name starts with `GATEWAY_` and holds `__`, which separates the parts of the
 * option's path; names without `__` (`GATEWAY_HOST` for `${GATEWAY_HOST}` in the file, a Kubernetes service's
 * `GATEWAY_PORT`) are left alone. A part names an option in any case, with or without `_` between its words;
 * the key of a map (`env`, `headers`, `toolSettings`) is taken as written. Values are read as YAML scalars.
 */

export const ENV_PREFIX = 'GATEWAY_'
const SEPARATOR = '__'
const FILE_SUFFIX = /_FILE$/i

/** One variable that set an option: its name and the option's path (never its value). */
export interface EnvOverride {
  variable: string
  path: string
}

/** What the environment did to a tree: the options it set, its problems, and the values to keep out of messages. */
export interface Overlay {
  overrides: EnvOverride[]
  problems: ConfigProblem[]
  hidden: Interpolated[]
}

type Schema = Record<string, unknown>
type Key = string | number

let jsonSchema: Schema | undefined
/** The JSON Schema of what may be written (zod's input side), which knows every option's name at every level. */
function configJsonSchema (): Schema {
  jsonSchema ??= z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' }) as Schema
  return jsonSchema
}

const isSchema = (value: unknown): value is Schema => value !== null && typeof value === 'object' && !Array.isArray(value)

/** The branches of a union (store kinds, upstream transports, `decide`), or the node itself. */
function branches (node: Schema): Schema[] {
  const union = node.anyOf ?? node.oneOf
  return Array.isArray(union) ? union.filter(isSchema).flatMap(branches) : [node]
}

const normalized = (name: string): string => name.toLowerCase().replaceAll('_', '')

/** The options of an object node (of every branch of a union), by their normalized name. */
function optionsOf (node: Schema): Map<string, { name: string, node: Schema }> {
  const options = new Map<string, { name: string, node: Schema }>()
  for (const branch of branches(node)) {
    if (!isSchema(branch.properties)) continue
    for (const [name, child] of Object.entries(branch.properties)) {
      if (isSchema(child) && !options.has(normalized(name))) options.set(normalized(name), { name, node: child })
    }
  }
  return options
}

type Step = { key: Key, node: Schema, file?: true } | { problem: string }

function arrayItems (node: Schema): Schema | undefined {
  return branches(node).map((branch) => branch.items).find(isSchema)
}

function recordValues (node: Schema): Schema | undefined {
  return branches(node).map((branch) => branch.additionalProperties).find(isSchema)
}

/** The upstream a part names: its index, or the upstream whose name it is (upper case, `-` written as `_`). */
function upstreamIndex (part: string, names: readonly string[]): Step {
  const matches = names.flatMap((name, index) => name.toLowerCase().replaceAll('-', '_') === part.toLowerCase() ? [index] : [])
  if (matches.length === 1) return { key: matches[0]!, node: {} }
  const list = `upstreams: ${names.length === 0 ? 'none' : names.join(', ')}`
  if (matches.length === 0) return { problem: `no upstream is named '${part}' (${list}); an upstream the file does not have is added by index (GATEWAY_UPSTREAMS__${names.length}__NAME)` }
  return { problem: `upstreams ${matches.map((i) => `'${names[i]}'`).join(' and ')} are both written '${part}'; address them by index (${list})` }
}

/** The child of `node` that one part of a variable's name names. */
function step (node: Schema, part: string, at: Key[], last: boolean, names: readonly string[]): Step {
  const items = arrayItems(node)
  if (items !== undefined && (/^\d+$/.test(part) || at.join('.') === 'upstreams')) {
    if (/^\d+$/.test(part)) return { key: Number(part), node: items }
    const found = upstreamIndex(part, names)
    return 'problem' in found ? found : { key: found.key, node: items }
  }
  const options = optionsOf(node)
  const option = options.get(normalized(part))
  if (option !== undefined) return { key: option.name, node: option.node }
  const fromFile = last && FILE_SUFFIX.test(part) ? options.get(normalized(part.replace(FILE_SUFFIX, ''))) : undefined
  if (fromFile !== undefined) return { key: fromFile.name, node: fromFile.node, file: true }
  const values = recordValues(node)
  if (values !== undefined) return { key: part, node: values }
  const where = at.length === 0 ? 'the configuration' : formatPath(at)
  if (options.size > 0) {
    const kind = at.length === 0 ? 'section' : 'option'
    return { problem: `'${part}' is no ${kind} of ${where}; its ${kind}s: ${[...options.values()].map((o) => o.name).join(', ')}` }
  }
  if (items !== undefined) return { problem: `'${part}' is no index of ${where}: write a number (0 is the first entry)` }
  return { problem: `${where} is a single value; it has no option '${part}'` }
}

/**
 * A variable's value as a YAML scalar: `true`/`false` and numbers are typed (as `${VAR}` alone in a plain
 * scalar), a quoted value is the string inside the quotes, `[ … ]` and `{ … }` are flow collections, and
 * anything else is the text as it is (a `#` or `: ` in a password stays in it).
 */
function valueOf (text: string): { value: unknown } | { problem: string } {
  const trimmed = text.trim()
  if (!/^(["'[{])/.test(trimmed)) return { value: typed(text) }
  const doc = parseDocument(trimmed)
  if (doc.errors.length > 0) return { problem: `cannot be read as YAML (${doc.errors[0]!.message.split('\n')[0]}); a value that starts with a quote, [ or { is read as YAML` }
  return { value: doc.toJS() as unknown }
}

/** Where a value sits, as the list of keys from the root; the containers on the way are made as needed. */
function put (tree: Record<string, unknown>, keys: readonly Key[], value: unknown): void {
  let container: Record<Key, unknown> = tree
  keys.forEach((key, i) => {
    if (i === keys.length - 1) {
      container[key] = value
      return
    }
    const wanted = typeof keys[i + 1] === 'number' ? 'array' : 'object'
    const current = container[key]
    const fits = wanted === 'array' ? Array.isArray(current) : isSchema(current)
    if (!fits) container[key] = wanted === 'array' ? [] : {}
    container = container[key] as Record<Key, unknown>
  })
}

/** The string values of a set value, each at its path, so that no problem shows one. */
function hiddenStrings (variable: string, path: Key[], value: unknown): Interpolated[] {
  if (typeof value === 'string') return value === '' ? [] : [{ path: formatPath(path), written: `\${${variable}}`, value, parts: [{ name: variable, value }] }]
  if (Array.isArray(value)) return value.flatMap((item, i) => hiddenStrings(variable, [...path, i], item))
  if (isSchema(value)) return Object.entries(value).flatMap(([key, item]) => hiddenStrings(variable, [...path, key], item))
  return []
}

const inside = (path: string, outer: string): boolean => path === outer || path.startsWith(`${outer}.`) || path.startsWith(`${outer}[`)

/** Sets every option a `GATEWAY_…__…` variable names in `tree` (in place), in the order of the variables' names. */
export function applyEnvironment (tree: Record<string, unknown>, env: Env, cwd = process.cwd()): Overlay {
  const overlay: Overlay = { overrides: [], problems: [], hidden: [] }
  const upstreams = Array.isArray(tree.upstreams) ? tree.upstreams as unknown[] : []
  const names = upstreams.map((u) => String((u as { name?: unknown } | null)?.name ?? ''))
  const variables = Object.keys(env)
    .filter((name) => name.toUpperCase().startsWith(ENV_PREFIX) && name.slice(ENV_PREFIX.length).includes(SEPARATOR) && (env[name] ?? '') !== '')
    .sort()
  const setBy = new Map<string, string>()
  for (const variable of variables) {
    const problem = (message: string): void => { overlay.problems.push({ path: variable, message }) }
    const parts = variable.slice(ENV_PREFIX.length).split(SEPARATOR)
    if (parts.some((part) => part === '')) {
      problem('has an empty part: the parts of an option\'s path are separated by one __')
      continue
    }
    let node = configJsonSchema()
    const keys: Key[] = []
    let file = false
    let failed: string | undefined
    for (const [i, part] of parts.entries()) {
      const next = step(node, part, keys, i === parts.length - 1, names)
      if ('problem' in next) {
        failed = next.problem
        break
      }
      keys.push(next.key)
      node = next.node
      file = next.file === true
    }
    if (failed !== undefined) {
      problem(failed)
      continue
    }
    const path = formatPath(keys)
    const other = [...setBy].find(([set]) => inside(path, set) || inside(set, path))
    if (other !== undefined) {
      problem(`${other[1]} already sets ${other[0]}; set each option once`)
      continue
    }
    const text = env[variable]!
    const read = file ? readSecretFile(text, cwd) : valueOf(text)
    if ('problem' in read) {
      problem(read.problem)
      continue
    }
    put(tree, keys, read.value)
    setBy.set(path, variable)
    overlay.overrides.push({ variable, path })
    overlay.hidden.push(...hiddenStrings(variable, keys, read.value))
  }
  for (const { variable, path } of overlay.overrides) {
    const gap = firstGap(tree, setBy.has(path) ? keysOf(path) : [])
    if (gap !== undefined) overlay.problems.push({ path: variable, message: `leaves ${gap} empty: an entry added by index follows the last one without a gap` })
  }
  return overlay
}

/** The keys of a formatted path (`upstreams[2].url` → upstreams, 2, url). */
function keysOf (path: string): Key[] {
  return [...path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)].map((m) => m[2] === undefined ? m[1]! : Number(m[2]))
}

/** The first entry missing before an index on the way to `keys`, as a path, or undefined. */
function firstGap (tree: unknown, keys: readonly Key[]): string | undefined {
  let node = tree
  for (const [i, key] of keys.entries()) {
    if (typeof key === 'number' && Array.isArray(node)) {
      const list: unknown[] = node
      const hole = Array.from({ length: key }, (_, j) => j).find((j) => !(j in list))
      if (hole !== undefined) return formatPath([...keys.slice(0, i), hole])
    }
    node = (node as Record<Key, unknown> | undefined)?.[key]
  }
  return undefined
}

/**
 * Variables that look meant for an option but are not read: `GATEWAY_<SECTION>_…` with one `_` where `__`
 * belongs (`GATEWAY_SERVER_PORT`). Only `--check` mentions them, as a note: a Kubernetes service named
 * `gateway-server` makes such names too.
 */
export function unreadVariables (env: Env): string[] {
  const sections = [...optionsOf(configJsonSchema()).keys()]
  return Object.keys(env).filter((name) => {
    const rest = name.slice(ENV_PREFIX.length)
    return name.toUpperCase().startsWith(ENV_PREFIX) && !rest.includes(SEPARATOR) && sections.some((section) => normalized(rest).startsWith(section) && normalized(rest) !== section && /_/.test(rest))
  }).sort()
}

/** Whether a problem's path is an option the environment set (its problem from the file no longer applies). */
export function overridden (path: string, overrides: readonly EnvOverride[]): boolean {
  return overrides.some((o) => inside(path, o.path))
}
