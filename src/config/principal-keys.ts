import { readFileSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import { parse } from 'yaml'
import type { PerPrincipalCredentialsConfig } from './credentials-schema.ts'

/**
 * The keys of `credentials: { kind: per-principal }`: from its file (a YAML or JSON map principal → key) and its
 * environment variables (`env`, which win over the file). Read at start and at each configuration reload, so a
 * rotated key is used from the next request on. A problem names the option it comes from, never a key.
 */

export interface KeyProblem {
  /** The option under `credentials` the problem is in: `file`, or `env.<principal>`. */
  readonly field: string
  readonly message: string
}

export interface PrincipalKeys {
  readonly keys: ReadonlyMap<string, string>
  readonly problems: readonly KeyProblem[]
  /** Said once per read, not refused: the key file may be read by others than the gateway. */
  readonly warnings: readonly KeyProblem[]
}

type Env = Readonly<Record<string, string | undefined>>

/** The map a key file holds, or why it is not one: keys must be non-empty strings (a number would lose digits). */
function fileKeys (path: string, cwd: string): { keys: Map<string, string> } | { problem: string } {
  let text: string
  try {
    text = readFileSync(resolve(cwd, path), 'utf8')
  } catch (err) {
    return { problem: `cannot read the key file '${path}': ${(err as NodeJS.ErrnoException).code ?? String(err)}` }
  }
  let tree: unknown
  try {
    tree = parse(text)
  } catch {
    // The parser's message may quote the file, and so a key: only where it failed is said.
    return { problem: `the key file '${path}' is not YAML or JSON` }
  }
  if (tree === null || tree === undefined) return { keys: new Map() }
  if (typeof tree !== 'object' || Array.isArray(tree)) return { problem: `the key file '${path}' must map each principal to its key (alice: <key>)` }
  const keys = new Map<string, string>()
  for (const [principal, key] of Object.entries(tree as Record<string, unknown>)) {
    if (typeof key !== 'string' || key === '') return { problem: `the key file '${path}' gives principal '${principal}' no key as a non-empty string (write it in quotes)` }
    if (/[\r\n]/.test(key)) return { problem: `the key of principal '${principal}' in '${path}' holds a line break, which no header can carry` }
    keys.set(principal, key)
  }
  return { keys }
}

/** Whether others than the file's owner may read it (group or world bits), as other secret files are judged. */
function readableByOthers (path: string, cwd: string): boolean {
  try {
    return (statSync(resolve(cwd, path)).mode & 0o077) !== 0
  } catch {
    return false
  }
}

export function readPrincipalKeys (config: PerPrincipalCredentialsConfig, env: Env = process.env, cwd = process.cwd()): PrincipalKeys {
  const keys = new Map<string, string>()
  const problems: KeyProblem[] = []
  const warnings: KeyProblem[] = []
  if (config.file !== undefined) {
    const read = fileKeys(config.file, cwd)
    if ('problem' in read) problems.push({ field: 'file', message: read.problem })
    else for (const [principal, key] of read.keys) keys.set(principal, key)
    if (!('problem' in read) && readableByOthers(config.file, cwd)) {
      warnings.push({ field: 'file', message: `the key file '${config.file}' may be read by other users than the gateway's (its mode allows group or others); chmod 600 it` })
    }
  }
  for (const [principal, variable] of Object.entries(config.env)) {
    const key = env[variable]
    if (key === undefined || key === '') problems.push({ field: `env.${principal}`, message: `the environment variable ${variable} is not set (or empty)` })
    else if (/[\r\n]/.test(key)) problems.push({ field: `env.${principal}`, message: `the environment variable ${variable} holds a line break, which no header can carry` })
    else keys.set(principal, key)
  }
  return { keys, problems, warnings }
}
