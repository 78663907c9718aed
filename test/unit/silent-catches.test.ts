// No failure in src/ is dropped without a trace: a rejection handler that does nothing (`.catch(() => {})`,
// `.catch(() => undefined)`) and an empty `catch {}` block are refused here, as layers.test.ts refuses an import
// that points up. What may be ignored is logged at debug with why (`ignoreWithTrace`), waited for with
// `settled()` where its failure is reported elsewhere, or, for a synchronous parse that falls through to a
// refusal, a catch block whose comment says so. A justified exception is listed below by file, with its reason.
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

/** Each silent handler in `text`, as its line number and the handler. */
function silentHandlers (text: string): Array<{ line: number, handler: string }> {
  const found: Array<{ line: number, handler: string }> = []
  for (const pattern of SILENT) {
    for (const match of text.matchAll(pattern)) found.push({ line: text.slice(0, match.index).split('\n').length, handler: match[0] })
  }
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
