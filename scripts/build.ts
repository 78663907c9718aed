// Compiles src/ to dist/ with esbuild, file for file (the layout tsc would write), then the container's health
// check (dist/healthcheck.js) and the demo upstream (dist/demo/main.js) once more as one file each with the
// packages they use, and copies the dashboard's static files. Types are checked by `npm run typecheck`, not here: this
// takes about a second, so `npm start` and the test setup can always build.
//
//   npm run build
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build, type Plugin } from 'esbuild'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
/** The dashboard's static files, served as they are. */
const DASHBOARD = 'src/admin/dashboard'

/**
 * Keeps every relative import an import of its own compiled file (`./x.ts` → `./x.js`), so each file of src/
 * becomes one file of dist/ and nothing is bundled; packages stay imports of node_modules/.
 */
const fileForFile: Plugin = {
  name: 'file-for-file',
  setup (esbuild) {
    esbuild.onResolve({ filter: /^\.\.?\// }, (args) => args.kind === 'entry-point'
      ? undefined
      : { path: args.path.replace(/\.ts$/, '.js'), external: true })
  },
}

/**
 * Small programs Node starts often, each written as one file with its packages: loaded from hundreds of files
 * they spend most of their start in module resolution and loading (the demo upstream: 0.45 s of CPU as one
 * file, 0.74 s as modules). The gateway itself (dist/main.js) stays file for file: bundled, it starts on half
 * the CPU, but a gateway whose PostgreSQL postmaster is killed with -9 lost its clients' connections in the
 * fault test (test/e2e/postgres-faults.test.ts), which the unbundled one never did; not bundled until that is
 * understood.
 */
const PROGRAMS = [
  { in: 'src/demo/main.ts', out: 'demo/main' },
  { in: 'src/healthcheck.ts', out: 'healthcheck' },
]

/** Packages the programs import from node_modules/: a native module (its binary sits beside its JavaScript), an optional one. */
export const NOT_BUNDLED = ['better-sqlite3', 'pg-native']

/** The packages written as CommonJS call require(), which an ES module has not: one made for the file. */
export const REQUIRE_BANNER = { js: "import { createRequire as gatewayCreateRequire } from 'node:module'; const require = gatewayCreateRequire(import.meta.url);" }

/** The package's name and version, put into the code where src/wire/versions.ts would read package.json. */
export function packageDefine (): string {
  const { name, version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string, version: string }
  return JSON.stringify({ name, version })
}

/** Writes dist/ from src/, each file through writeWhenChanged. */
export async function buildDist (): Promise<void> {
  const sources = readdirSync(join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => join('src', file))
  const { outputFiles } = await build({
    absWorkingDir: ROOT,
    entryPoints: sources,
    outbase: 'src',
    outdir: 'dist',
    bundle: true,
    packages: 'external',
    plugins: [fileForFile],
    platform: 'node',
    format: 'esm',
    target: 'node20',
    sourcemap: 'linked',
    sourcesContent: false,
    define: { GATEWAY_PACKAGE: packageDefine() },
    write: false,
    logLevel: 'warning',
  })
  const programs = await build({
    absWorkingDir: ROOT,
    entryPoints: PROGRAMS,
    outdir: 'dist',
    bundle: true,
    external: NOT_BUNDLED,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    banner: REQUIRE_BANNER,
    define: { GATEWAY_PACKAGE: packageDefine() },
    sourcemap: 'linked',
    sourcesContent: false,
    write: false,
    logLevel: 'warning',
  })
  const bundled = new Set(programs.outputFiles.map((file) => file.path))
  for (const file of [...outputFiles.filter((file) => !bundled.has(file.path)), ...programs.outputFiles]) {
    writeWhenChanged(file.path, file.contents)
  }
  for (const file of readdirSync(join(ROOT, DASHBOARD))) {
    writeWhenChanged(join(ROOT, 'dist', DASHBOARD.slice('src/'.length), file), readFileSync(join(ROOT, DASHBOARD, file)))
  }
}

/** Writes `path` unless it holds `contents` already; through a rename, so a process reading it never sees half a file. */
export function writeWhenChanged (path: string, contents: Uint8Array): void {
  let current: Buffer | undefined
  try {
    current = readFileSync(path)
  } catch {
    mkdirSync(dirname(path), { recursive: true })
  }
  if (current?.equals(contents) === true) return
  const temporary = `${path}.${process.pid}.tmp`
  writeFileSync(temporary, contents)
  renameSync(temporary, path)
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) await buildDist()
