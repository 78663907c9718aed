// Building the project's container image with buildah, as test/e2e/container-image.test.ts does (and
// scripts/build-test-image.ts, which .ci/run calls before the tests): no Docker daemon, no container registry.
import { execFile } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import { delimiter, join } from 'node:path'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'

/** What to do when buildah is missing. */
export const MISSING_BUILDAH = 'test/e2e/container-image.test.ts builds the Docker image with buildah and found none on the PATH: ' +
  'install `buildah` and `debootstrap` first (Debian: `sudo apt-get install buildah debootstrap`), as .ci/run does, and run ' +
  'the tests as root (the base image is made with debootstrap). Every other test file runs without them; see docs/development.md.'

/** Where the test's image goes; each build replaces it, its layers stay in buildah's cache. */
export const IMAGE = 'localhost/mcp-task-gateway:test'

/** Throws what to install unless buildah is on the PATH. */
export function requireBuildah (env: NodeJS.ProcessEnv = process.env): void {
  const found = (env.PATH ?? '').split(delimiter).filter((d) => d !== '').some((dir) => {
    try {
      accessSync(join(dir, 'buildah'), constants.X_OK)
      return true
    } catch {
      return false
    }
  })
  if (!found) throw new Error(MISSING_BUILDAH)
}

/** Runs a command to its end; its stdout, or an error with the end of what it wrote. */
export async function run (command: string, args: string[]): Promise<string> {
  return await new Promise<string>((resolve, reject) => {
    execFile(command, args, { cwd: REPO_ROOT, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err === null) resolve(stdout)
      else reject(new Error(`${command} ${args.join(' ')} failed: ${err.message}\n${`${stdout}\n${stderr}`.slice(-4000)}`))
    })
  })
}

/** The Node 22 base image (scripts/node-base-image.sh: built on its first run, reused after). */
export async function nodeBaseImage (): Promise<string> {
  return (await run('bash', ['scripts/node-base-image.sh'])).trim().split('\n').at(-1)!
}

/** An npm setting of this machine, or undefined when it has none. */
async function npmSetting (name: string): Promise<string | undefined> {
  const value = (await run('npm', ['config', 'get', name])).trim()
  return value === '' || value === 'null' || value === 'undefined' ? undefined : value
}

/**
 * Builds the project's Dockerfile on `base` into IMAGE, as docs/operations.md tells an operator to: in the
 * Docker format (the OCI format drops HEALTHCHECK), with the layers of earlier builds reused, `npm ci` on this
 * machine's npm registry and CA file (proxies: buildah passes HTTP_PROXY and the like itself).
 */
export async function buildImage (base: string): Promise<void> {
  const registry = await npmSetting('registry')
  const cafile = await npmSetting('cafile')
  await run('buildah', [
    'bud', '--isolation', 'chroot', '--format', 'docker', '--layers',
    '--build-arg', `NODE_IMAGE=${base}`,
    ...(registry === undefined ? [] : ['--build-arg', `NPM_REGISTRY=${registry}`]),
    ...(cafile === undefined ? [] : ['--secret', `id=npm-ca,src=${cafile}`]),
    '-t', IMAGE, '.',
  ])
}
