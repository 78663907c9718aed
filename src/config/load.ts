import { readFile } from 'node:fs/promises'
import { parseDocument } from 'yaml'
import type { z } from 'zod'
import { GatewayError, errorMessage } from '../errors.ts'
import { formatPath, hideInterpolated, interpolateDocument, interpolateTree, newInterpolation, type ConfigProblem, type Env, type Interpolation } from './interpolate.ts'
import { configSchema, upstreamCommonSchema, upstreamVariants, type Config } from './schema.ts'
import { applyEnvironment, overridden, type EnvOverride } from './env-overrides.ts'
import { credentialKeyProblems } from './config-warnings.ts'

export { formatPath, type ConfigProblem } from './interpolate.ts'
export type { EnvOverride } from './env-overrides.ts'

/** Upstream names must be unique; checked on the raw tree so it is reported even when other fields are wrong. */
function duplicateNames (tree: unknown): ConfigProblem[] {
  const upstreams = (tree as { upstreams?: unknown } | null)?.upstreams
  if (!Array.isArray(upstreams)) return []
  const seen = new Map<string, number>()
  const problems: ConfigProblem[] = []
  upstreams.forEach((upstream: unknown, index) => {
    const name = (upstream as { name?: unknown } | null)?.name
    if (typeof name !== 'string') return
    const first = seen.get(name)
    if (first === undefined) seen.set(name, index)
    else problems.push({ path: `upstreams[${index}].name`, message: `duplicate upstream name '${name}' (also upstreams[${first}])` })
  })
  return problems
}

function describeIssue (issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys') return `unknown option(s) ${issue.keys.map((k) => `'${k}'`).join(', ')}; check the spelling against config/gateway.example.yaml`
  if (issue.code === 'invalid_union' && 'discriminator' in issue) return `${issue.message}; expected one of the documented values`
  if (issue.code === 'invalid_type' && issue.expected === 'string' && /received (number|boolean)/.test(issue.message)) return `${issue.message}; write it in quotes to keep it a string`
  return issue.message
}

function deepFreeze<T> (value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const item of Object.values(value)) deepFreeze(item)
  }
  return value
}

/**
 * An upstream whose `transport` is wrong or missing fails the union on that one field; its other options are
 * checked against the variant its options point at (`command`: stdio, `url`: streamable-http), or against the
 * options every upstream has, so that every problem is reported at once.
 */
function otherUpstreamProblems (tree: unknown, index: number): ConfigProblem[] {
  const entry = ((tree as { upstreams?: unknown[] }).upstreams ?? [])[index]
  if (entry === null || typeof entry !== 'object') return []
  const guess = 'command' in entry ? 'stdio' : 'url' in entry ? 'streamable-http' : undefined
  const result = guess === undefined
    ? upstreamCommonSchema.safeParse(entry)
    : upstreamVariants[guess].safeParse({ ...entry, transport: guess })
  if (result.success) return []
  return result.error.issues
    .filter((issue) => issue.path[0] !== 'transport')
    .map((issue) => ({ path: formatPath(['upstreams', index, ...issue.path]), message: describeIssue(issue) }))
}

/** A configuration as loaded: the options in force, the GATEWAY_… variables that set some, and the tree as written. */
export interface LoadedConfig {
  config: Config
  overrides: EnvOverride[]
  /** What the file and the environment wrote, before defaults: what an option left out would not tell (see preflight). */
  written: unknown
}

/**
 * Applies the environment's options to an interpolated tree and validates it; a path whose variable or
 * secret file is missing gets no second problem from the schema, and none at all when the environment sets it.
 */
function validate (tree: unknown, env: Env, found: Interpolation, source: string): LoadedConfig {
  const overlay = tree !== null && typeof tree === 'object' && !Array.isArray(tree)
    ? applyEnvironment(tree as Record<string, unknown>, env)
    : { overrides: [], problems: [], hidden: [] }
  for (const path of found.missing) if (overridden(path, overlay.overrides)) found.missing.delete(path)
  const problems = [...found.problems.filter((p) => !overridden(p.path, overlay.overrides)), ...overlay.problems, ...duplicateNames(tree)]
  const result = configSchema.safeParse(tree)
  if (!result.success) {
    const covered = (path: string): boolean => [...found.missing].some((m) => path === m || path.startsWith(`${m}.`) || path.startsWith(`${m}[`))
    for (const issue of result.error.issues) {
      const path = formatPath(issue.path)
      if (covered(path)) continue
      problems.push({ path, message: describeIssue(issue) })
      const [top, index, field] = issue.path
      if (top === 'upstreams' && typeof index === 'number' && field === 'transport' && issue.path.length === 3) {
        problems.push(...otherUpstreamProblems(tree, index).filter((p) => !covered(p.path)))
      }
    }
  }
  // Per-principal keys and OAuth client secrets are read at each load: one that cannot serve refuses the start or the reload.
  if (result.success) problems.push(...credentialKeyProblems(result.data, env))
  const hidden = [...found.interpolated, ...overlay.hidden]
  if (problems.length > 0 || !result.success) throw configError(source, hideInterpolated(problems, hidden))
  return { config: deepFreeze(result.data), overrides: overlay.overrides, written: tree }
}

/**
 * Validates an already-parsed configuration tree, with the options the environment sets (GATEWAY_…__…);
 * throws one GW_ERR_CONFIG_INVALID listing every problem.
 */
export function parseConfig (raw: unknown, env: Env = process.env, source = 'configuration'): Config {
  const found = newInterpolation()
  const tree = interpolateTree(raw ?? {}, env, found)
  return validate(tree, env, found, source).config
}

export function configError (source: string, problems: readonly ConfigProblem[]): GatewayError {
  const lines = problems.map((p) => `  - ${p.path}: ${p.message}`).join('\n')
  return new GatewayError('GW_ERR_CONFIG_INVALID', [`${source}\n${lines}`], { data: problems })
}

/** Parses YAML text, with the options the environment sets; syntax errors are reported with their line and column. */
export function readConfigText (text: string, env: Env = process.env, source = 'configuration'): LoadedConfig {
  const doc = parseDocument(text, { prettyErrors: true })
  if (doc.errors.length > 0) {
    throw configError(source, doc.errors.map((e) => ({
      path: e.linePos ? `line ${e.linePos[0].line}, column ${e.linePos[0].col}` : '(yaml)',
      message: e.message.split('\n')[0] ?? e.message,
    })))
  }
  const found = newInterpolation()
  interpolateDocument(doc, env, found)
  return validate(doc.toJS() ?? {}, env, found, source)
}

export function parseConfigText (text: string, env: Env = process.env, source = 'configuration'): Config {
  return readConfigText(text, env, source).config
}

/** Reads and validates a configuration file, with the options the environment sets. */
export async function readConfig (file: string, env: Env = process.env): Promise<LoadedConfig> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    throw new GatewayError('GW_ERR_CONFIG_READ', [file, errorMessage(err)], { cause: err })
  }
  return readConfigText(text, env, file)
}

export async function loadConfig (file: string, env: Env = process.env): Promise<Config> {
  return (await readConfig(file, env)).config
}
