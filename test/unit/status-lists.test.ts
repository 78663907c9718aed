// The task status machine is written once, in src/wire/task-state.ts: every other source file takes its sets
// of statuses from there (the Lua and SQL of the stores included). This test reads every file under src/ and
// fails where one writes a set out again.
//
// The rule. A status literal is a string literal whose text is one of the five statuses. A file restates a
// status list when one of these holds two or more *different* statuses:
//   - an array literal's elements (`['working', 'input_required']`, `new Set([...])`, `.includes` on a list);
//   - a union type's members (`'completed' | 'failed'`);
//   - an object literal's keys (a table keyed by status);
//   - a chain of `||` / `&&` whose comparisons (`===`, `!==`, `==`, `!=`) test statuses;
//   - case labels that share one body (`case 'completed': case 'failed':`);
//   - the text of one string or template literal, counting quoted words ('working' or "working"): SQL
//     `status IN (...)`, a Lua `or` chain or table.
// One status used alone is fine: the target of a move (`status: 'completed'`), a single comparison, a
// mapping that names two statuses in separate places. The admin dashboard's browser code reads the sets
// from a module the admin listener renders from task-state.ts.
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'
import { TASK_STATUSES } from '../../src/wire/task-state.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const SOURCE_OF_TRUTH = 'src/wire/task-state.ts'

const STATUSES: ReadonlySet<string> = new Set(TASK_STATUSES)
const QUOTED_STATUS = new RegExp(`(['"])(${TASK_STATUSES.join('|')})\\1`, 'g')
const COMPARISONS = new Set([
  ts.SyntaxKind.EqualsEqualsEqualsToken, ts.SyntaxKind.ExclamationEqualsEqualsToken,
  ts.SyntaxKind.EqualsEqualsToken, ts.SyntaxKind.ExclamationEqualsToken,
])
const CHAINS = new Set([ts.SyntaxKind.BarBarToken, ts.SyntaxKind.AmpersandAmpersandToken])

interface Finding { file: string, line: number, what: string, statuses: string[] }

function statusOf (node: ts.Node): string | undefined {
  const literal = ts.isLiteralTypeNode(node) ? node.literal : node
  if (!ts.isStringLiteral(literal) && !ts.isNoSubstitutionTemplateLiteral(literal)) return undefined
  return STATUSES.has(literal.text) ? literal.text : undefined
}

function keyOf (property: ts.ObjectLiteralElementLike): string | undefined {
  const name = property.name
  if (name === undefined) return undefined
  const text = ts.isIdentifier(name) || ts.isStringLiteral(name) ? name.text : undefined
  return text !== undefined && STATUSES.has(text) ? text : undefined
}

function quotedIn (text: string): string[] {
  return [...text.matchAll(QUOTED_STATUS)].map((match) => match[2]!)
}

/** The statuses the comparisons of a `||` / `&&` chain test, the chain entered at its top. */
function comparedIn (node: ts.Expression, operator: ts.SyntaxKind): string[] {
  if (ts.isParenthesizedExpression(node)) return comparedIn(node.expression, operator)
  if (!ts.isBinaryExpression(node)) return []
  if (node.operatorToken.kind === operator) return [...comparedIn(node.left, operator), ...comparedIn(node.right, operator)]
  if (!COMPARISONS.has(node.operatorToken.kind)) return []
  return [statusOf(node.left), statusOf(node.right)].filter((status) => status !== undefined)
}

/** The literal text of a string or template literal; a template's substitutions are left out. */
function textOf (node: ts.Node): string | undefined {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text
  if (ts.isTemplateExpression(node)) return [node.head.text, ...node.templateSpans.map((span) => span.literal.text)].join('')
  return undefined
}

/** The lists of statuses a TypeScript or JavaScript source writes out. */
function restatedLists (file: string, text: string): Finding[] {
  const kind = file.endsWith('.js') ? ts.ScriptKind.JS : ts.ScriptKind.TS
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, kind)
  const found: Finding[] = []
  const report = (node: ts.Node, what: string, statuses: Array<string | undefined>): void => {
    const distinct = [...new Set(statuses.filter((status) => status !== undefined))]
    if (distinct.length < 2) return
    found.push({ file, line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1, what, statuses: distinct })
  }
  const visit = (node: ts.Node): void => {
    if (ts.isArrayLiteralExpression(node)) report(node, 'array', node.elements.map(statusOf))
    else if (ts.isUnionTypeNode(node)) report(node, 'union type', node.types.map(statusOf))
    else if (ts.isObjectLiteralExpression(node)) report(node, 'object keyed by status', node.properties.map(keyOf))
    else if (ts.isCaseBlock(node)) {
      let labels: Array<string | undefined> = []
      for (const clause of node.clauses) {
        if (ts.isCaseClause(clause)) labels.push(statusOf(clause.expression))
        if (clause.statements.length === 0) continue
        report(clause, 'case labels', labels)
        labels = []
      }
    } else if (ts.isBinaryExpression(node) && CHAINS.has(node.operatorToken.kind)) {
      const operator = node.operatorToken.kind
      const parent = ts.isParenthesizedExpression(node.parent) ? node.parent.parent : node.parent
      const top = !ts.isBinaryExpression(parent) || parent.operatorToken.kind !== operator
      if (top) report(node, 'comparison chain', comparedIn(node, operator))
    }
    const embedded = textOf(node)
    if (embedded !== undefined) report(node, 'SQL or Lua text', quotedIn(embedded))
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

/** Any other file (HTML): quoted statuses anywhere in it. */
function restatedInText (file: string, text: string): Finding[] {
  const statuses = [...new Set(quotedIn(text))]
  return statuses.length < 2 ? [] : [{ file, line: 1, what: 'quoted statuses', statuses }]
}

function sourceFiles (dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    return entry.isDirectory() ? sourceFiles(path) : [relative(ROOT, path).split('\\').join('/')]
  })
}

const STATUS_WORD = new RegExp(`\\b(${TASK_STATUSES.join('|')})\\b`, 'g')

function restated (file: string): Finding[] {
  const text = readFileSync(join(ROOT, file), 'utf8')
  // Parsing is the slow part: a file that never names two statuses cannot restate a list.
  if (new Set(Array.from(text.matchAll(STATUS_WORD), (match) => match[1])).size < 2) return []
  return /\.[cm]?[jt]s$/.test(file) ? restatedLists(file, text) : restatedInText(file, text)
}

describe('status lists', () => {
  it('are written only in task-state.ts', () => {
    const files = sourceFiles(join(ROOT, 'src')).filter((file) => file !== SOURCE_OF_TRUTH)
    expect(files.length).toBeGreaterThan(100)
    const found = files.flatMap(restated).map((f) => `${f.file}:${f.line} ${f.what}: ${f.statuses.join(', ')}`)
    expect(found).toEqual([])
  })

  it('task-state.ts itself is found by the rule (the rule sees a list when there is one)', () => {
    expect(restated(SOURCE_OF_TRUTH).length).toBeGreaterThan(0)
  })

  it.each([
    ["const RUNNING = ['working', 'input_required']", 'array'],
    ["type Ended = 'completed' | 'failed' | 'cancelled'", 'union type'],
    ['const next = { working: 1, input_required: 2 }', 'object keyed by status'],
    ["const running = s === 'working' || s === 'input_required'", 'comparison chain'],
    ["const running = s !== 'completed' && (s !== 'failed' && s !== 'cancelled')", 'comparison chain'],
    ["switch (s) { case 'completed': case 'failed': return true }", 'case labels'],
    ["const sql = \"SELECT * FROM tasks WHERE status IN ('working', 'input_required')\"", 'SQL or Lua text'],
    ["const lua = `if status == 'completed' or status == 'failed' then return false end`", 'SQL or Lua text'],
    // eslint-disable-next-line no-template-curly-in-string -- the example is a template literal with a substitution
    ["const lua = `if status == 'completed' or ${x} or status == \"failed\" then`", 'SQL or Lua text'],
  ])('finds a list in %s', (code, what) => {
    expect(restatedLists('example.ts', code).map((f) => f.what)).toEqual([what])
  })

  it.each([
    "const ended = { status: 'completed', statusMessage: null }",
    "if (task.status === 'failed' && task.outcome !== null) return 'completed'",
    "const next = status === 'input_required' ? 1 : status === 'completed' ? 2 : 3",
    "switch (s) { case 'completed': return 1; case 'failed': return 2 }",
    "const sql = \"UPDATE task_inputs SET state = 'answered' WHERE state = 'pending' AND status = 'working'\"",
    "store.transition(id, sourcesOf('cancelled'), 'cancelled', {}, now)",
  ])('finds no list in %s', (code) => {
    expect(restatedLists('example.ts', code)).toEqual([])
  })
})
