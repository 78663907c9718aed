// The gateway and the demo upstream as child processes run compiled (dist/), which starts about three times
// cheaper than through tsx; test/global-setup.ts builds dist/ first whenever src/ is newer, so a child never
// runs stale code. Fixtures of test/ have no build and run through tsx.

/** The gateway's CLI, compiled. */
export const GATEWAY_MAIN = 'dist/main.js'

/** The bundled demo upstream, compiled. */
export const DEMO_MAIN = 'dist/demo/main.js'

/** Node's arguments to run `script`: a compiled file as it is, a TypeScript one through tsx. */
export function nodeArgs (script: string): string[] {
  return script.endsWith('.ts') ? ['--import', 'tsx', script] : [script]
}
