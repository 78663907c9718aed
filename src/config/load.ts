import { readFile } from 'node:fs/promises'
import { parseDocument } from 'yaml'
import type { z } from 'zod'
import { GatewayError, errorMessage } from '../errors.ts'
import { configSchema, type Config } from './schema.ts'

/** One problem found in a configuration, with the YAML path it belongs to. */
export interface ConfigProblem {
  path: string
  message: string
}

type Env = Readonly<Record<string, string | undefined>>
type Path = ReadonlyArray<string | number | symbol>

export function formatPath (path: Path): string {
  let out = ''
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`
    else out += out === '' ? String(key) : `.${String(key)}`
  }
  return out === '' ? '(root)' : out
}

const VARIABLE = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g

const WHOLE_VARIABLE = /^\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}$/

/** A value that is exactly one `${…}` may stand for a number or a boolean (`port: ${PORT:-8080}`). */
function typed (text: string): string | number | boolean {
  if (text === 'true' || text === 'false') return text === 'true'
  return /^-?\d+(\.\d+)?$/.test(text) ? Number(text) : text
}

/** Replaces `${VAR}` and `${VAR:-default}` in every string of the tree; a missing variable is a problem. */
function interpolate (value: unknown, env: Env, path: Array<string | number>, problems: ConfigProblem[]): unknown {
  if (typeof value === 'string') {
    const whole = WHOLE_VARIABLE.test(value)
    const replaced = value.replace(VARIABLE, (_match, name: string, fallback: string | undefined) => {
      const found = env[name]
      if (found !== undefined && found !== '') return found
      if (fallback !== undefined) return fallback
      problems.push({ path: formatPath(path), message: `environment variable ${name} is not set (write \${${name}:-default} to give a default)` })
      return ''
    })
    return whole ? typed(replaced) : replaced
  }
  if (Array.isArray(value)) return value.map((item, index) => interpolate(item, env, [...path, index], problems))
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {}
    for (const [key, item] of Object.entries(value)) out[key] = interpolate(item, env, [...path, key], problems)
    return out
  }
  return value
}

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
  return issue.message
}

function deepFreeze<T> (value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const item of Object.values(value)) deepFreeze(item)
  }
  return value
}

/** Validates an already-parsed configuration tree; throws one GW_ERR_CONFIG_INVALID listing every problem. */
export function parseConfig (raw: unknown, env: Env = process.env, source = 'configuration'): Config {
  const problems: ConfigProblem[] = []
  const interpolated = interpolate(raw ?? {}, env, [], problems)
  problems.push(...duplicateNames(interpolated))
  const result = configSchema.safeParse(interpolated)
  if (!result.success) {
    for (const issue of result.error.issues) problems.push({ path: formatPath(issue.path), message: describeIssue(issue) })
  }
  if (problems.length > 0 || !result.success) throw configError(source, problems)
  return deepFreeze(result.data)
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
  return parseConfig(doc.toJS(), env, source)
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
