// No failure in src/ is dropped without a trace: a rejection handler that does nothing (`.catch(() => {})`,
// `.catch(() => undefined)`, the `() => {}` of `.then(f, () => {})`) and an empty `catch {}` block are refused here,
// as layers.test.ts refuses an import that points up. What may be ignored is logged at debug with why
// (`ignoreWithTrace`), waited for with `settled()` where its failure is reported elsewhere, or, for a synchronous
// parse that falls through to a refusal, a catch block whose comment says so. A justified exception is listed
// below by file, with its reason.
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { describe, expect, it } from 'vitest'

const root = join(import.meta.dirname, '..', '..')
const src = join(root, 'src')

/** Files that keep a silent handler, by path under the repository root, with why. */
const EXCEPTIONS: Record<string, string> = {
  'src/admin/dashboard/dashboard.js': 'browser code with no log to write to: a detail refresh that fails is done again by the next poll',
}

/** The bundled demo upstream is a program of its own (see eslint.layers.js). */
const APART = [join(src, 'demo')]

const SILENT = [
  /\.catch\(\s*(?:async\s*)?\(\s*(?:_\w*)?\s*\)\s*=>\s*(?:\{\s*\}|undefined|void 0)\s*\)/g,
  /\bcatch\s*(?:\(\s*\w*\s*\))?\s*\{\s*\}/g,
]

/** A function that does nothing, as a whole argument: `() => {}`, `async (_err) => undefined`, `() => void 0`. */
const DOES_NOTHING = /^\s*(?:async\s*)?\(\s*(?:_\w*)?\s*\)\s*=>\s*(?:\{\s*\}|undefined|void 0)\s*$/

/**
 * The arguments of the call whose `(` is at `open`, split at its own commas (not those nested in brackets).
 * Enough for source code that lint formats: a bracket inside a string literal would throw the count off, and none
 * of the handlers looked for has one.
 */
function callArguments (text: string, open: number): string[] {
  const args: string[] = []
  let depth = 0
  let start = open + 1
  for (let i = open; i < text.length; i++) {
    const char = text[i]
    if (char === '(' || char === '[' || char === '{') depth++
    else if (char === ')' || char === ']' || char === '}') {
      if (--depth > 0) continue
      args.push(text.slice(start, i))
      return args
    } else if (char === ',' && depth === 1) {
      args.push(text.slice(start, i))
      start = i + 1
    }
  }
  return args
}

/** Each `.then(onFulfilled, () => {})` in `text`: its rejection handler drops the failure as `.catch(() => {})` does. */
function silentThens (text: string): Array<{ index: number, handler: string }> {
  const found: Array<{ index: number, handler: string }> = []
  for (const match of text.matchAll(/\.then\(/g)) {
    const open = match.index + match[0].length - 1
    const onRejected = callArguments(text, open)[1]
    if (onRejected !== undefined && DOES_NOTHING.test(onRejected)) found.push({ index: match.index, handler: `.then(…, ${onRejected.trim()})` })
  }
  return found
}

/** Each silent handler in `text`, as its line number and the handler. */
function silentHandlers (text: string): Array<{ line: number, handler: string }> {
  const lineOf = (index: number): number => text.slice(0, index).split('\n').length
  const found: Array<{ line: number, handler: string }> = []
  for (const pattern of SILENT) {
    for (const match of text.matchAll(pattern)) found.push({ line: lineOf(match.index), handler: match[0] })
  }
  for (const { index, handler } of silentThens(text)) found.push({ line: lineOf(index), handler })
  return found.sort((a, b) => a.line - b.line)
}

function sourceFiles (dir: string): string[] {
  if (APART.includes(dir)) return []
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return /\.(?:ts|js|mjs)$/.test(entry.name) ? [path] : []
  })
}

describe('failures in src/', () => {
  it('recognises the handlers it refuses, and not those that trace or handle', () => {
    expect(silentHandlers('p.catch(() => {})\nq.catch(() => undefined)\ntry { f() } catch {}\ntry { f() } catch (err) { }').map((h) => h.line)).toEqual([1, 2, 3, 4])
    expect(silentHandlers("p.catch(ignoreWithTrace(log, 'why'))\nawait settled(p)\ntry { f() } catch {\n  // not JSON: refused below\n}\np.catch(() => null)")).toEqual([])
  })

  it('recognises a `.then` whose rejection handler does nothing, however its fulfilment handler is written', () => {
    const text = [
      'p.then((s) => s.close(), () => {})',
      'p.then(undefined, () => {})',
      'await p.then(() => n++, async (_err) => undefined)',
      'p.then(',
      '  (r) => { f(r, [1, 2]) },',
      '  () => void 0,',
      ')',
    ].join('\n')
    expect(silentHandlers(text).map((h) => h.line)).toEqual([1, 2, 3, 4])
    const handled = [
      'p.then(() => true, () => false)',
      "p.then((s) => s.close(), ignoreWithTrace(log, 'why'))",
      'p.then(nothing, nothing)',
      'p.then((r) => { f(r, () => {}) })',
      "p.then(f, (err) => { log.warn({ err }, 'why') })",
    ].join('\n')
    expect(silentHandlers(handled)).toEqual([])
  })

  it('are never dropped by a handler that does nothing, outside the listed exceptions', () => {
    const offenders: string[] = []
    for (const file of sourceFiles(src)) {
      const path = relative(root, file).split('\\').join('/')
      if (path in EXCEPTIONS) continue
      for (const { line, handler } of silentHandlers(readFileSync(file, 'utf8'))) offenders.push(`${path}:${line} ${handler}`)
    }
    expect(offenders, 'log it with ignoreWithTrace(log, why), wait with settled(), or handle it (src/observability/ignored.ts)').toEqual([])
  })

  it('lists as exceptions only files that still need one', () => {
    for (const path of Object.keys(EXCEPTIONS)) {
      expect(silentHandlers(readFileSync(join(root, path), 'utf8')).length, path).toBeGreaterThan(0)
    }
  })
})
