// Compiles src/ to dist/ with esbuild, file for file (the layout tsc would write), and copies the dashboard's
// static files. Types are checked by `npm run typecheck`, not here: this takes well under a second, so
// `npm start` and the test setup can always build.
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
    write: false,
    logLevel: 'warning',
  })
  for (const file of outputFiles) writeWhenChanged(file.path, file.contents)
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
