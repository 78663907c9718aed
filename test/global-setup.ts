import { execFileSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import { Redis } from 'ioredis'
import type { TestProject } from 'vitest/node'
import { COMPILED_FIXTURES, FIXTURES_OUT } from './helpers/built.ts'

declare module 'vitest' {
  export interface ProvidedContext {
    /** Why the tests that need Redis cannot run (null when Redis answered PING). */
    redisProblem: string | null
  }
}

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/**
 * Asks Redis for a PING once, before any test file runs. A file that needs Redis (it imports
 * test/helpers/redis.ts) then fails at once with what to start, instead of every test timing out.
 */
export default async function setup (project: TestProject): Promise<void> {
  buildWhenStale()
  await compileFixtures()
  project.provide('redisProblem', await redisProblem())
}

const ROOT = fileURLToPath(new URL('../', import.meta.url))

/**
 * Tests run the gateway and the demo upstream as child processes from dist/ (test/helpers/built.ts): it is
 * built first when missing or older than any file of src/, so a child never runs stale code.
 */
function buildWhenStale (): void {
  const built = modifiedAt(join(ROOT, 'dist', 'main.js'))
  const newestSource = Math.max(...readdirSync(join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })
    .map((file) => modifiedAt(join(ROOT, 'src', file))))
  if (built >= newestSource) return
  execFileSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit' })
}

/**
 * Bundles each fixture that tests start as a child process into FIXTURES_OUT (test/helpers/built.ts), its
 * packages left as imports of node_modules/. Always, as it takes esbuild some tens of milliseconds: no staleness
 * check to get wrong. A file is replaced only when its content changed, and through a rename, so a child of
 * another run in this checkout never reads a half-written one.
 */
async function compileFixtures (): Promise<void> {
  const { outputFiles } = await build({
    absWorkingDir: ROOT,
    entryPoints: COMPILED_FIXTURES.map((name) => ({ in: `test/fixtures/${name}.ts`, out: name })),
    outdir: FIXTURES_OUT,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    target: 'node20',
    // Shared code stays inside each bundle: one file per fixture, as a child process loads it.
    splitting: false,
    write: false,
    logLevel: 'warning',
  })
  mkdirSync(join(ROOT, FIXTURES_OUT), { recursive: true })
  for (const file of outputFiles) {
    if (readOrNothing(file.path) === file.text) continue
    const temporary = `${file.path}.${process.pid}.tmp`
    writeFileSync(temporary, file.contents)
    renameSync(temporary, file.path)
  }
}

function readOrNothing (file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8')
  } catch {
    return undefined
  }
}

function modifiedAt (file: string): number {
  try {
    return statSync(file).mtimeMs
  } catch {
    return 0
  }
}

async function redisProblem (): Promise<string | null> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0, retryStrategy: () => null })
  redis.on('error', () => {})
  try {
    await redis.connect()
    await redis.ping()
    return null
  } catch (err) {
    return `this test file needs a Redis server at ${REDIS_URL} (set REDIS_URL for another one), ` +
      `and none answered (${(err as Error).message.replace(/\.$/, '')}). Start one, for example \`redis-server\` or ` +
      '`docker run --rm -p 6379:6379 redis:7`; see docs/development.md.'
  } finally {
    redis.disconnect()
  }
}
