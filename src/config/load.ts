import { readFile } from 'node:fs/promises'
import { parseDocument } from 'yaml'
import type { z } from 'zod'
import { GatewayError, errorMessage } from '../errors.ts'
import { formatPath, hideInterpolated, interpolateDocument, interpolateTree, newInterpolation, type ConfigProblem, type Env, type Interpolation } from './interpolate.ts'
import { configSchema, upstreamCommonSchema, upstreamVariants, type Config } from './schema.ts'

export { formatPath, type ConfigProblem } from './interpolate.ts'

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

/** Validates an interpolated tree; a path whose variable is missing gets no second problem from the schema. */
function validate (tree: unknown, found: Interpolation, source: string): Config {
  const problems = [...found.problems, ...duplicateNames(tree)]
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
  if (problems.length > 0 || !result.success) throw configError(source, hideInterpolated(problems, found.interpolated))
  return deepFreeze(result.data)
}

/** Validates an already-parsed configuration tree; throws one GW_ERR_CONFIG_INVALID listing every problem. */
export function parseConfig (raw: unknown, env: Env = process.env, source = 'configuration'): Config {
  const found = newInterpolation()
  const tree = interpolateTree(raw ?? {}, env, found)
  return validate(tree, found, source)
}

export function configError (source: string, problems: readonly ConfigProblem[]): GatewayError {
  const lines = problems.map((p) => `  - ${p.path}: ${p.message}`).join('\n')
  return new GatewayError('GW_ERR_CONFIG_INVALID', [`${source}\n${lines}`], { data: problems })
}

/** Parses YAML text; syntax errors are reported with their line and column. */
export function parseConfigText (text: string, env: Env = process.env, source = 'configuration'): Config {
  const doc = parseDocument(text, { prettyErrors: true })
  if (doc.errors.length > 0) {
    throw configError(source, doc.errors.map((e) => ({
      path: e.linePos ? `line ${e.linePos[0].line}, column ${e.linePos[0].col}` : '(yaml)',
      message: e.message.split('\n')[0] ?? e.message,
    })))
  }
  const found = newInterpolation()
  interpolateDocument(doc, env, found)
  return validate(doc.toJS() ?? {}, found, source)
}

export async function loadConfig (file: string, env: Env = process.env): Promise<Config> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    throw new GatewayError('GW_ERR_CONFIG_READ', [file, errorMessage(err)], { cause: err })
  }
  return parseConfigText(text, env, file)
}
