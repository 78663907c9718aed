// The Node versions package.json's `engines` promises are the ones every installed package accepts, so that
// `npm ci` on the oldest supported Node installs without EBADENGINE warnings.
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import semver from 'semver'
import { describe, expect, it } from 'vitest'

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))

interface LockEntry { version?: string, engines?: Record<string, string> | string[] }

describe('package.json engines', () => {
  it('every package npm ci installs accepts the oldest Node that engines allows', async () => {
    const manifest = JSON.parse(await readFile(`${REPO_ROOT}package.json`, 'utf8')) as { engines: { node: string } }
    const oldest = semver.minVersion(manifest.engines.node)
    expect(oldest?.version).toBe('20.19.0')
    const lock = JSON.parse(await readFile(`${REPO_ROOT}package-lock.json`, 'utf8')) as { packages: Record<string, LockEntry> }
    const refusing: string[] = []
    for (const [path, entry] of Object.entries(lock.packages)) {
      if (path === '' || entry.engines === undefined || Array.isArray(entry.engines)) continue
      const range = entry.engines.node
      if (range !== undefined && !semver.satisfies(oldest!, range)) refusing.push(`${path.replace(/^.*node_modules\//, '')}@${entry.version ?? '?'} requires node ${range}`)
    }
    expect(refusing).toEqual([])
  })
})
