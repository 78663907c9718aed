import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import { Redis } from 'ioredis'
import pg from 'pg'
import type { TestProject } from 'vitest/node'
import { NOT_BUNDLED, REQUIRE_BANNER, buildDist, packageDefine, writeWhenChanged } from '../scripts/build.ts'
import { COMPILED_FIXTURES, FIXTURES_OUT } from './helpers/built.ts'

declare module 'vitest' {
  export interface ProvidedContext {
    /** Why the tests that need Redis cannot run (null when Redis answered PING). */
    redisProblem: string | null
    /** Why the tests that need PostgreSQL cannot run (null when it answered a query). */
    postgresProblem: string | null
  }
}

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const POSTGRES_URL = process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

/**
 * Before any test file runs: builds what tests start as child processes, and asks Redis for a PING and
 * PostgreSQL for a `SELECT 1` once. A file that needs one of them (it imports test/helpers/redis.ts or
 * test/helpers/postgres.ts) then fails at once with what to start, instead of every test timing out.
 */
export default async function setup (project: TestProject): Promise<void> {
  await Promise.all([buildDist(), compileFixtures()])
  const [redis, postgres] = await Promise.all([redisProblem(), postgresProblem()])
  project.provide('redisProblem', redis)
  project.provide('postgresProblem', postgres)
}

const ROOT = fileURLToPath(new URL('../', import.meta.url))

/**
 * The gateway and the demo upstream run from dist/, which buildDist() writes; the fixtures from bundles in
 * FIXTURES_OUT (test/helpers/built.ts), each fixture one file with its packages, as dist/main.js is (a child
 * process then starts on about half the CPU time: module loading dominates a start).
 * Both always, as esbuild takes well under a second: no staleness check to get wrong. A file changes only when
 * its content did, through a rename, so a child of another run in this checkout never reads half of one.
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
    external: NOT_BUNDLED,
    banner: REQUIRE_BANNER,
    define: { GATEWAY_PACKAGE: packageDefine() },
    target: 'node20',
    // Shared code stays inside each bundle: one file per fixture, as a child process loads it.
    splitting: false,
    write: false,
    logLevel: 'warning',
  })
  for (const file of outputFiles) writeWhenChanged(file.path, file.contents)
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

async function postgresProblem (): Promise<string | null> {
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 2000 })
  client.on('error', () => {})
  try {
    await client.connect()
    await client.query('SELECT 1')
    return null
  } catch (err) {
    return `this test file needs a PostgreSQL server at ${POSTGRES_URL} (set POSTGRES_URL for another one), ` +
      `and none answered (${(err as Error).message.replace(/\.$/, '')}). Start one, for example with \`pg_ctlcluster 15 main start\` ` +
      'or `docker run --rm -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust postgres:15`; see docs/development.md.'
  } finally {
    await client.end().catch(() => {})
  }
}
