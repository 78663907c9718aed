// The Node versions package.json's `engines` promises are the ones every package the gateway runs with accepts,
// so that `npm ci` on the oldest supported Node installs without EBADENGINE warnings.
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))

type Version = [number, number, number]

/** `20`, `20.19`, `20.x`, `20.19.0`: missing or wildcard parts are 0 (the lowest version the range names). */
function parse (text: string): { version: Version, parts: number } {
  const parts = text.replace(/^v/, '').split('.').filter((p) => p !== '' && p !== 'x' && p !== 'X' && p !== '*').map(Number)
  return { version: [parts[0] ?? 0, parts[1] ?? 0, parts[2] ?? 0], parts: parts.length }
}

function compare (a: Version, b: Version): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2]
}

/** Whether `version` satisfies one comparator (`>=18`, `^20.9.0`, `~1.2`, `20.x`, `*`). */
function satisfiesComparator (version: Version, comparator: string): boolean {
  const match = /^(>=|<=|>|<|=|\^|~)?\s*(.*)$/.exec(comparator)!
  const operator = match[1] ?? ''
  const { version: bound, parts } = parse(match[2]!)
  const c = compare(version, bound)
  switch (operator) {
    case '>=': return c >= 0
    case '>': return c > 0
    case '<=': return c <= 0
    case '<': return c < 0
    case '^': return c >= 0 && (bound[0] > 0 ? version[0] === bound[0] : version[0] === 0 && version[1] === bound[1])
    case '~': return c >= 0 && version[0] === bound[0] && (parts < 2 || version[1] === bound[1])
    default: return parts === 0 || (version[0] === bound[0] && (parts < 2 || version[1] === bound[1]) && (parts < 3 || version[2] === bound[2]))
  }
}

/** Whether `version` satisfies an npm range: alternatives joined by `||`, each a space-separated list of comparators. */
function satisfies (version: Version, range: string): boolean {
  return range.split('||').some((alternative) => {
    const comparators = alternative.trim().replace(/(>=|<=|>|<|=|\^|~)\s+/g, '$1').split(/\s+/).filter((c) => c !== '')
    return comparators.every((comparator) => satisfiesComparator(version, comparator))
  })
}

interface LockEntry { version?: string, dev?: boolean, optional?: boolean, engines?: Record<string, string> | string[] }

describe('package.json engines', () => {
  it('the range check reads the forms the lockfile uses', () => {
    const node20 = parse('20.19.0').version
    expect(satisfies(node20, '>=20.19')).toBe(true)
    expect(satisfies(node20, '>=22')).toBe(false)
    expect(satisfies(node20, '^18.18.0 || ^20.9.0 || >=21.1.0')).toBe(true)
    expect(satisfies(node20, '20.x || 22.x')).toBe(true)
    expect(satisfies(node20, '>= 10.x')).toBe(true)
    expect(satisfies(node20, '^20.0.0 || ^22.0.0 || >=24.0.0')).toBe(true)
    expect(satisfies(node20, '^22.13.0 || >=24')).toBe(false)
  })

  it('every package the gateway runs with accepts the oldest Node that engines allows', async () => {
    const manifest = JSON.parse(await readFile(`${REPO_ROOT}package.json`, 'utf8')) as { engines: { node: string } }
    const oldest = parse(/^>=\s*(\S+)$/.exec(manifest.engines.node)![1]!).version
    const lock = JSON.parse(await readFile(`${REPO_ROOT}package-lock.json`, 'utf8')) as { packages: Record<string, LockEntry> }
    const refusing: string[] = []
    for (const [path, entry] of Object.entries(lock.packages)) {
      if (path === '' || entry.dev === true || entry.engines === undefined || Array.isArray(entry.engines)) continue
      const range = entry.engines.node
      if (range !== undefined && !satisfies(oldest, range)) refusing.push(`${path.replace(/^.*node_modules\//, '')}@${entry.version ?? '?'} requires node ${range}`)
    }
    expect(refusing).toEqual([])
  })
})
