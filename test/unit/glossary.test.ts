// docs/glossary.md stays true: every word it defines is one the code or the other documents use, every word of the
// project's own that a new engineer meets is defined, and every file and name it points to is where it says (its
// links are checked with every document's, in doc-links.test.ts).
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const root = join(import.meta.dirname, '..', '..')
const GLOSSARY = join(root, 'docs', 'glossary.md')
const glossary = readFileSync(GLOSSARY, 'utf8')

/** The project's own words that the glossary must define: each entry is one word, under any of its names. */
const REQUIRED = [['home'], ['handover'], ['takeover'], ['held call'], ['revision', 'era'], ['survival'], ['origin'], ['sink']]

/**
 * The words the glossary defines, lower case: each paragraph that opens with a bold term (`**Held call.**`,
 * `**Origin** (of a call).`) defines it, and a `(formerly *era*)` after the term defines the old name too.
 */
function definedTerms (text: string): string[] {
  const terms: string[] = []
  for (const match of text.matchAll(/^\*\*([^*]+?)\.?\*\*(?: \((?:formerly \*([^*]+)\*|[^)]*)\))?/gm)) {
    terms.push(match[1]!.toLowerCase())
    if (match[2] !== undefined) terms.push(match[2].toLowerCase())
  }
  return terms
}

/** The text of every file under `dir` with one of the extensions, but the glossary itself. */
function texts (dir: string, extensions: RegExp): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && extensions.test(entry.name))
    .map((entry) => join(entry.parentPath, entry.name))
    .filter((path) => path !== GLOSSARY)
    .map((path) => readFileSync(path, 'utf8'))
}

const elsewhere = [...texts(join(root, 'src'), /\.(?:ts|js)$/), ...texts(join(root, 'docs'), /\.md$/)]

/** Whether `term` is used: as words in prose (`held call`), or joined in a name (`heldCall`, `held-calls`, `HELD_CALL`). */
function isUsed (term: string): boolean {
  const words = term.split(/\s+/).map((word) => word.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
  const pattern = new RegExp(`\\b${words.join('[\\s_-]?')}`, 'i')
  return elsewhere.some((text) => pattern.test(text))
}

/** Every source file, by path relative to the repository root. */
const sourceFiles = readdirSync(join(root, 'src'), { recursive: true, encoding: 'utf8' }).map((path) => `src/${path.split('\\').join('/')}`)

describe('docs/glossary.md', () => {
  const defined = definedTerms(glossary)

  it('reads the terms it defines', () => {
    expect(definedTerms('**Held call.** text\n**Origin** (of a call). text\n**Revision** (formerly *era*). text\nnot **bold.** here'))
      .toEqual(['held call', 'origin', 'revision', 'era'])
    expect(defined.length).toBeGreaterThan(10)
  })

  it('defines each of the project\'s own words', () => {
    const missing = REQUIRED.filter((names) => !names.some((name) => defined.includes(name))).map((names) => names.join('/'))
    expect(missing, 'define these in docs/glossary.md').toEqual([])
  })

  it('defines only words that src/ or the other documents use', () => {
    expect(defined.filter((term) => !isUsed(term)), 'not used in src/ or docs/: drop them from the glossary').toEqual([])
  })

  it('points only to files and names that exist', () => {
    const wrong: string[] = []
    // `Name` in `path`: the name is declared in that file.
    for (const match of glossary.matchAll(/`(\w+)` in `([\w./-]+\.ts)`/g)) {
      const [, name, path] = match as unknown as [string, string, string]
      const declares = new RegExp(`^(?:export )?(?:abstract )?(?:interface|type|class|function|const|enum) ${name}\\b`, 'm')
      if (!existsSync(join(root, path)) || !declares.test(readFileSync(join(root, path), 'utf8'))) wrong.push(`${name} in ${path}`)
    }
    // Any other file it names: a path from the root, or a bare file name found somewhere in src/.
    for (const match of glossary.matchAll(/`((?:src\/)?[\w./-]+\.ts)`/g)) {
      const path = match[1]!
      const found = path.startsWith('src/') ? existsSync(join(root, path)) : sourceFiles.some((file) => file.endsWith(`/${path}`))
      if (!found) wrong.push(path)
    }
    expect(wrong).toEqual([])
  })
})
