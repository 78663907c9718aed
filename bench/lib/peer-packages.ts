// The peers of the stdio-peers section are not dependencies of the project: they are installed on first use,
// at a pinned version, into node_modules/.cache (removed by the next `npm ci`), without install scripts. One of
// them needs a newer Node than the project's `engines` allow at install time, which would make every `npm ci`
// of the project warn; at run time the bench starts them with its own Node.
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { REPO_ROOT } from '../../test/fixtures/spawn-upstream.ts'

const run = promisify(execFile)

/** Where a peer package of a given version is installed. */
function installDir (pkg: string, version: string): string {
  return join(REPO_ROOT, 'node_modules', '.cache', 'bench-peers', `${pkg}@${version}`)
}

/** The path of `bin` of `pkg@version`, installing the package first when it is not there yet. */
export async function peerBinScript (pkg: string, version: string, bin: string): Promise<string> {
  const dir = installDir(pkg, version)
  const manifestPath = join(dir, 'node_modules', pkg, 'package.json')
  if (!existsSync(manifestPath)) {
    const npm = join(dirname(process.execPath), 'npm')
    await run(existsSync(npm) ? npm : 'npm', ['install', '--prefix', dir, '--no-save', '--no-package-lock', '--ignore-scripts',
      '--no-audit', '--no-fund', '--loglevel=error', `${pkg}@${version}`], { cwd: REPO_ROOT, maxBuffer: 16 * 1024 * 1024 })
  }
  const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as { bin?: Record<string, string> | string }
  const relative = typeof manifest.bin === 'string' ? manifest.bin : manifest.bin?.[bin]
  if (relative === undefined) throw new Error(`${pkg}@${version} declares no bin '${bin}'`)
  return join(dirname(manifestPath), relative)
}
