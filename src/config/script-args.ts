import { basename } from 'node:path'

/**
 * Which argument of a stdio upstream is the script its interpreter runs, for `--check` to say when that file
 * does not exist (`node dist/servr.js` fails only once spawned, as an upstream that exits at once). The rule
 * is deliberately narrow, so that it never flags a package name, a flag or code:
 *
 * - the command's file name is `node`, `nodejs`, `bun` or `tsx`, or `python`, `python2`, `python3`,
 *   `python3.N`, `pypy` or `pypy3` (`.exe` allowed);
 * - its arguments are read in order up to the first one that runs code or a module instead of a file
 *   (`-e`, `--eval`, `-p`, `--print` for node, `-c` and `-m` for python): then nothing is checked;
 * - the first argument that does not start with `-` and looks like a file (starts with `/`, `./` or `../`, or
 *   ends in `.js`, `.mjs`, `.cjs`, `.ts`, `.mts` or `.cts` for node, `.py` for python) is the script. The
 *   arguments after it are the script's own, and are not checked.
 */

const NODE_LIKE = /^(node|nodejs|bun|tsx)$/
const PYTHON_LIKE = /^(python|python2|python3(\.\d+)?|pypy|pypy3)$/
const NODE_SCRIPT = /\.(js|mjs|cjs|ts|mts|cts)$/
const PYTHON_SCRIPT = /\.py$/
const NODE_CODE = new Set(['-e', '--eval', '-p', '--print'])
const PYTHON_CODE = new Set(['-c', '-m'])
const PATH_LIKE = /^(\/|\.\.?\/)/

/** The index in `args` of the script `command` runs, or undefined when it runs none this rule can tell. */
export function scriptArgument (command: string, args: readonly string[]): number | undefined {
  const name = basename(command).replace(/\.exe$/i, '')
  const family = NODE_LIKE.test(name) ? 'node' : PYTHON_LIKE.test(name) ? 'python' : undefined
  if (family === undefined) return undefined
  const code = family === 'node' ? NODE_CODE : PYTHON_CODE
  const script = family === 'node' ? NODE_SCRIPT : PYTHON_SCRIPT
  for (const [index, arg] of args.entries()) {
    if (code.has(arg) || [...code].some((flag) => flag.startsWith('--') && arg.startsWith(`${flag}=`))) return undefined
    if (arg.startsWith('-')) continue
    if (PATH_LIKE.test(arg) || script.test(arg)) return index
  }
  return undefined
}
