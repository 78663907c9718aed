import { isPair, isScalar, isSeq, visit, type Document } from 'yaml'
import { readSecretFile } from './secret-file.ts'

/** One problem found in a configuration, with the YAML path it belongs to. */
export interface ConfigProblem {
  path: string
  message: string
}

export type Env = Readonly<Record<string, string | undefined>>
type Path = ReadonlyArray<string | number | symbol>

export function formatPath (path: Path): string {
  let out = ''
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`
    else out += out === '' ? String(key) : `.${String(key)}`
  }
  return out === '' ? '(root)' : out
}

/** A string that took (some of) its value from the environment: where, as written, what it became, and the variables' values in it. */
export interface Interpolated {
  path: string
  written: string
  value: string
  parts: Array<{ name: string, value: string }>
}

/**
 * What interpolation found: the problems, the paths whose value is missing (nothing more is said of them),
 * and the strings that took a value from the environment (never echoed in a problem: see hideInterpolated).
 */
export interface Interpolation {
  problems: ConfigProblem[]
  missing: Set<string>
  interpolated: Interpolated[]
}

export function newInterpolation (): Interpolation {
  return { problems: [], missing: new Set(), interpolated: [] }
}

/** `${VAR}`, `${VAR:-default}`, or `${file:/run/secrets/x}` (the file's content: see secret-file.ts). */
const VARIABLE = /\$\{(?:file:([^}]+)|([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?)\}/g

const WHOLE_VARIABLE = /^\$\{(?:file:[^}]+|[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?)\}$/

/** A value that is exactly one `${…}` in a plain (unquoted) scalar may stand for a number or a boolean (`port: ${PORT:-8080}`). */
export function typed (text: string): string | number | boolean {
  if (text === 'true' || text === 'false') return text === 'true'
  return /^-?\d+(\.\d+)?$/.test(text) ? Number(text) : text
}

/**
 * Replaces `${VAR}`, `${VAR:-default}` and `${file:…}` in one string; a variable that is unset and has no
 * default, or a file that cannot be read, is a problem.
 */
function substitute (value: string, env: Env, path: string, found: Interpolation): string {
  const parts: Interpolated['parts'] = []
  const replaced = value.replace(VARIABLE, (_match, file: string | undefined, name: string, fallback: string | undefined) => {
    if (file !== undefined) {
      const read = readSecretFile(file)
      if ('value' in read) {
        parts.push({ name: `file:${file}`, value: read.value })
        return read.value
      }
      found.problems.push({ path, message: read.problem })
      found.missing.add(path)
      return ''
    }
    const set = env[name]
    if (set !== undefined && set !== '') {
      parts.push({ name, value: set })
      return set
    }
    if (fallback !== undefined) return fallback
    found.problems.push({ path, message: `environment variable ${name} is not set (write \${${name}:-default} to give a default)` })
    found.missing.add(path)
    return ''
  })
  if (parts.length > 0) found.interpolated.push({ path, written: value, value: replaced, parts })
  return replaced
}

/** A value from the environment this long or longer is hidden in every problem, not only in its own path's. */
const HIDDEN_EVERYWHERE = 8
/** Shorter values of variables inside a longer string are no secret, and would be found inside unrelated words. */
const HIDDEN_PART = 4

/**
 * The problems with every value that came from the environment (a token, a password: the variable may hold
 * a secret) replaced by `the value of ${VAR}`, so that neither the error log nor a reload's answer shows it.
 * A problem at the path of such a value never shows it, nor a variable's part of it (a message may show the
 * value changed: `https://<value>` for `<value>/x`), which it names `${VAR}`; longer values are hidden in any problem.
 */
export function hideInterpolated (problems: readonly ConfigProblem[], interpolated: readonly Interpolated[]): ConfigProblem[] {
  if (interpolated.length === 0) return [...problems]
  return problems.map((problem) => {
    let message = problem.message
    for (const { path, written, value, parts } of interpolated) {
      const own = problem.path === path || problem.path.startsWith(`${path}.`) || problem.path.startsWith(`${path}[`)
      if (own || value.length >= HIDDEN_EVERYWHERE) {
        const label = `the value of ${WHOLE_VARIABLE.test(written) ? written.replace(/:-[^}]*\}$/, '}') : `'${written}'`}`
        for (const shown of new Set([value, String(typed(value))])) message = message.split(`'${shown}'`).join(label).split(shown).join(label)
      }
      for (const part of parts) {
        if (part.value.length >= (own ? HIDDEN_PART : HIDDEN_EVERYWHERE)) message = message.split(part.value).join(`\${${part.name}}`)
      }
    }
    return message === problem.message ? problem : { ...problem, message }
  })
}

/** Interpolates every string of an already-parsed tree; with no quoting to go by, a whole `${…}` is typed. */
export function interpolateTree (value: unknown, env: Env, found: Interpolation, path: Array<string | number> = []): unknown {
  if (typeof value === 'string') {
    const replaced = substitute(value, env, formatPath(path), found)
    return WHOLE_VARIABLE.test(value) ? typed(replaced) : replaced
  }
  if (Array.isArray(value)) return value.map((item, index) => interpolateTree(item, env, found, [...path, index]))
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {}
    for (const [key, item] of Object.entries(value)) out[key] = interpolateTree(item, env, found, [...path, key])
    return out
  }
  return value
}

/** The YAML path of a node from the visitor's ancestors (pairs give keys, sequences give indexes). */
function pathOf (ancestors: readonly unknown[], node: unknown): Array<string | number> {
  const path: Array<string | number> = []
  for (const [i, ancestor] of ancestors.entries()) {
    const child = ancestors[i + 1] ?? node
    if (isPair(ancestor)) path.push(isScalar(ancestor.key) ? String(ancestor.key.value) : String(ancestor.key))
    else if (isSeq(ancestor)) path.push(ancestor.items.indexOf(child as never))
  }
  return path
}

/**
 * Interpolates the scalars of a YAML document in place. A quoted scalar stays a string whatever the
 * variable holds; only a plain scalar that is exactly one `${…}` takes the type of its value.
 */
export function interpolateDocument (doc: Document, env: Env, found: Interpolation): void {
  visit(doc, {
    Scalar (_key, node, ancestors) {
      if (typeof node.value !== 'string' || !node.value.includes('${')) return
      const parent = ancestors.at(-1)
      if (isPair(parent) && parent.key === node) return
      const text = node.value
      const replaced = substitute(text, env, formatPath(pathOf(ancestors, node)), found)
      node.value = node.type === 'PLAIN' && WHOLE_VARIABLE.test(text) ? typed(replaced) : replaced
    },
  })
}
