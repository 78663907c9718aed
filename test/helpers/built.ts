// Child processes run compiled JavaScript, which starts about three times cheaper than through tsx:
// the gateway and the demo upstream from dist/, the upstream fixtures of test/fixtures/ from bundles in
// FIXTURES_OUT. test/global-setup.ts builds both before any test file runs, so a child never runs stale code.

/** The gateway's CLI, compiled. */
export const GATEWAY_MAIN = 'dist/main.js'

/** The bundled demo upstream, compiled. */
export const DEMO_MAIN = 'dist/demo/main.js'

/** Where the global setup writes the compiled fixtures (relative to the repository root, where children run). */
export const FIXTURES_OUT = 'node_modules/.cache/test-fixtures'

/**
 * The fixtures tests start as child processes, each bundled on its own. heap-gateway.ts is not one of them:
 * it starts the gateway from src/, which reads package.json relative to its own file, so it stays on tsx.
 */
export const COMPILED_FIXTURES = [
  'conformance-2026-upstream',
  'conformance-upstream',
  'large-answer-upstream',
  'legacy-sse-upstream',
  'modern-upstream',
  'native-task-upstream',
  'replayable-upstream',
  'stateful-upstream',
  'trace-probe-upstream',
  'v1-http-upstream',
] as const

export type CompiledFixture = typeof COMPILED_FIXTURES[number]

/** The compiled file of test/fixtures/<name>.ts (`.mjs`: node_modules/ has no package.json saying ESM). */
export function fixture (name: CompiledFixture): string {
  return `${FIXTURES_OUT}/${name}.mjs`
}

const FIXTURE_SOURCE = /(?:^|[\\/])test[\\/]fixtures[\\/]([\w-]+)\.ts$/

/** Node's arguments to run `script`: a compiled file as it is, a fixture compiled, any other TypeScript through tsx. */
export function nodeArgs (script: string): string[] {
  const name = FIXTURE_SOURCE.exec(script)?.[1]
  if (name !== undefined && isCompiledFixture(name)) return [fixture(name)]
  return script.endsWith('.ts') ? ['--import', 'tsx', script] : [script]
}

function isCompiledFixture (name: string): name is CompiledFixture {
  return (COMPILED_FIXTURES as readonly string[]).includes(name)
}
