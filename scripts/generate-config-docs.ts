/**
 * Writes `docs/configuration.md` from the JSON Schema of the configuration (itself generated from the zod
 * schema in src/config/schema.ts) and the hand-written prose of scripts/configuration-template.md: one heading
 * per section of the file, its description, the template's note for it, and a table of its options (option,
 * type, default, meaning). Sections that are unions (store kinds, upstream transports) get a table of the
 * options every variant has and one per group of variants for the rest.
 *
 *   npm run config:schema      (writes config/gateway.schema.json and this file)
 *
 * test/unit/config-docs.test.ts renders the page in memory and fails when the committed file differs.
 */
import { readFileSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { configJsonSchema, DURATION_PATTERN, SIZE_PATTERN } from './generate-config-schema.ts'

export const CONFIG_DOCS_FILE = fileURLToPath(new URL('../docs/configuration.md', import.meta.url))
export const CONFIG_DOCS_TEMPLATE = fileURLToPath(new URL('./configuration-template.md', import.meta.url))

type JsonSchema = Record<string, unknown>

interface Row {
  option: string
  type: string
  default: string
  meaning: string
}

/** Placeholder of a record's key in option paths, by the record's name (`toolSettings.<tool>.timeout`). */
const RECORD_KEYS: Record<string, string> = { toolSettings: 'tool' }

/** Where a section's heading and table go: the template's `<!-- section NAME -->` notes follow the header. */
const SECTION_MARK = /^<!-- section ([A-Za-z]+) -->$/m

const LARGEST_SAFE = Number.MAX_SAFE_INTEGER

function isSchema (value: unknown): value is JsonSchema {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

function schemas (value: unknown): JsonSchema[] {
  return Array.isArray(value) ? value.filter(isSchema) : []
}

function properties (node: JsonSchema): Array<[string, JsonSchema]> {
  if (!isSchema(node.properties)) return []
  return Object.entries(node.properties).filter((entry): entry is [string, JsonSchema] => isSchema(entry[1]))
}

function required (node: JsonSchema): string[] {
  return Array.isArray(node.required) ? node.required.filter((name): name is string => typeof name === 'string') : []
}

/** A value as it is written in YAML flow style: `1h`, `[]`, `["*"]`, `{ after: 500ms }`. */
function yamlValue (value: unknown): string {
  if (typeof value === 'string') return /^[\w./:@-]+$/.test(value) && !/^[-:]/.test(value) ? value : JSON.stringify(value)
  if (Array.isArray(value)) return `[${value.map(yamlValue).join(', ')}]`
  if (isSchema(value)) {
    const entries = Object.entries(value)
    return entries.length === 0 ? '{}' : `{ ${entries.map(([key, item]) => `${key}: ${yamlValue(item)}`).join(', ')} }`
  }
  return String(value)
}

function code (text: string): string {
  return text.includes('`') ? `\`\` ${text} \`\`` : `\`${text}\``
}

function unitOf (node: JsonSchema): 'duration' | 'size' | undefined {
  const patterns = schemas(node.anyOf).map((branch) => branch.pattern)
  if (patterns.includes(DURATION_PATTERN)) return 'duration'
  if (patterns.includes(SIZE_PATTERN)) return 'size'
  return undefined
}

function integerRange (node: JsonSchema): string {
  const min = typeof node.minimum === 'number' ? node.minimum : undefined
  const max = typeof node.maximum === 'number' && node.maximum < LARGEST_SAFE ? node.maximum : undefined
  if (min !== undefined && max !== undefined) return ` ${min}–${max}`
  if (min !== undefined) return ` ≥ ${min}`
  return max === undefined ? '' : ` ≤ ${max}`
}

function plural (type: string): string {
  return ({ string: 'strings', integer: 'integers', number: 'numbers', object: 'objects', boolean: 'booleans', URL: 'URLs' } as Record<string, string>)[type] ?? type
}

function choices (values: unknown[]): string {
  const written = values.map((value) => code(yamlValue(value)))
  return written.length < 2 ? written.join('') : `${written.slice(0, -1).join(', ')} or ${written.at(-1)!}`
}

/** The type column: `duration`, `integer 1–100`, `` `a`, `b` or `c` ``, `list of strings`, … */
function typeOf (node: JsonSchema): string {
  const unit = unitOf(node)
  if (unit !== undefined) return unit
  if ('const' in node) return code(yamlValue(node.const))
  if (Array.isArray(node.enum)) return choices(node.enum)
  const branches = schemas(node.anyOf ?? node.oneOf)
  if (branches.length > 0) {
    if (branches.every((branch) => 'const' in branch)) return choices(branches.map((branch) => branch.const))
    return branches.map(typeOf).join(' or ')
  }
  switch (node.type) {
    case 'string':
      if (node.format === 'uri') return 'URL'
      return typeof node.minLength === 'number' && node.minLength > 1 ? `string of ${node.minLength}+ characters` : 'string'
    case 'integer': return `integer${integerRange(node)}`
    case 'number': return node.exclusiveMinimum === 0 ? 'number > 0' : 'number'
    case 'boolean': return 'boolean'
    case 'array': {
      const items = isSchema(node.items) ? node.items : {}
      if (Array.isArray(items.enum)) return 'list of names'
      return `list of ${plural(typeOf(items))}`
    }
    case 'object':
      if (isSchema(node.additionalProperties) && properties(node).length === 0) return `map of ${plural(typeOf(node.additionalProperties))}`
      return 'object'
    default: return 'any'
  }
}

/**
 * The meaning column and what its description says about the default: a trailing `; default: …` moves to the
 * default column, and the unit hint that units.ts appends (`(duration: …)`) goes, since the type says it.
 */
function describe (node: JsonSchema): { meaning: string, defaultNote?: string } {
  let text = typeof node.description === 'string' ? node.description : ''
  text = text.replace(/ \((duration|size): [^)]*\)$/, '')
  const note = /^(.*?)[;.]? default: ([^;]+)$/.exec(text)
  if (note) return { meaning: note[1]!, defaultNote: note[2]! }
  return { meaning: text }
}

function cell (text: string): string {
  return text.replaceAll('|', '\\|')
}

interface Context {
  /** The default of this option as its parent's default holds it (`store.kind` from the section's default). */
  inherited?: unknown
  isRequired: boolean
}

function defaultOf (node: JsonSchema, context: Context, note: string | undefined): string {
  if (note !== undefined) return note
  const value = 'default' in node ? node.default : context.inherited
  if (value !== undefined) return code(yamlValue(value))
  return context.isRequired ? '(required)' : 'none'
}

/** Rows of one option and of everything under it. */
function rowsOf (name: string, node: JsonSchema, path: string, context: Context): Row[] {
  const { meaning, defaultNote } = describe(node)
  const objectBranch = schemas(node.anyOf).find((branch) => properties(branch).length > 0)
  const record = node.type === 'object' && properties(node).length === 0 && isSchema(node.additionalProperties) ? node.additionalProperties : undefined
  const items = node.type === 'array' && isSchema(node.items) && properties(node.items).length > 0 ? node.items : undefined
  const fields = properties(node).length > 0 ? node : record !== undefined && properties(record).length > 0 ? record : items ?? objectBranch
  const container = fields !== undefined && fields !== objectBranch
  const own: Row[] = container && meaning === '' && defaultNote === undefined
    ? []
    : [{ option: path, type: typeOf(node), default: defaultOf(node, context, defaultNote), meaning }]
  if (fields === undefined) return own
  const childPath = record !== undefined ? `${path}.<${RECORD_KEYS[name] ?? 'name'}>` : items !== undefined ? `${path}[]` : path
  const defaults = isSchema(node.default) ? node.default : isSchema(context.inherited) ? context.inherited : {}
  const needed = required(fields)
  return [...own, ...properties(fields).flatMap(([child, schema]) =>
    rowsOf(child, schema, `${childPath}.${child}`, { inherited: defaults[child], isRequired: needed.includes(child) }))]
}

function table (rows: Row[]): string {
  return [
    '| option | type | default | meaning |',
    '|---|---|---|---|',
    ...rows.map((row) => `| ${cell(code(row.option))} | ${cell(row.type)} | ${cell(row.default)} | ${cell(row.meaning)} |`),
  ].join('\n')
}

function listed (names: string[]): string {
  const written = names.map(code)
  return written.length < 2 ? written.join('') : `${written.slice(0, -1).join(', ')} and ${written.at(-1)!}`
}

/**
 * A union of objects told apart by one property (`kind`, `transport`): the options all variants share, then
 * those of each group of variants. A shared option whose default or meaning differs shows each variant's.
 */
function variantTables (variants: JsonSchema[], inherited: unknown): string[] {
  const propertyOf = (variant: JsonSchema, name: string): JsonSchema => properties(variant).find(([other]) => other === name)?.[1] ?? {}
  const discriminator = properties(variants[0]!).map(([name]) => name).find((name) => variants.every((variant) => 'const' in propertyOf(variant, name)))
  if (discriminator === undefined) throw new Error('a union section needs a property that tells its variants apart')
  const kinds = variants.map((variant) => propertyOf(variant, discriminator))
  const labels = kinds.map((kind) => String(kind.const))
  const defaults = isSchema(inherited) ? inherited : {}
  const byOption = new Map<string, { rows: Row[], labels: string[] }>()
  variants.forEach((variant, i) => {
    const needed = required(variant)
    for (const [name, schema] of properties(variant)) {
      if (name === discriminator) continue
      for (const row of rowsOf(name, schema, name, { inherited: defaults[name], isRequired: needed.includes(name) })) {
        const entry = byOption.get(row.option) ?? { rows: [], labels: [] }
        entry.rows.push(row)
        entry.labels.push(labels[i]!)
        byOption.set(row.option, entry)
      }
    }
  })
  const discriminatorRow: Row = {
    option: discriminator,
    type: choices(labels),
    default: defaults[discriminator] === undefined ? '(required)' : code(yamlValue(defaults[discriminator])),
    meaning: kinds.map((kind) => `${code(String(kind.const))}: ${describe(kind).meaning}`).join('; '),
  }
  const groups = new Map<string, Row[]>()
  for (const { rows, labels: where } of byOption.values()) {
    const first = rows[0]!
    const byDefault = new Map<string, string[]>()
    rows.forEach((row, i) => byDefault.set(row.default, [...(byDefault.get(row.default) ?? []), where[i]!]))
    const byMeaning = new Map<string, string[]>()
    rows.forEach((row, i) => byMeaning.set(row.meaning, [...(byMeaning.get(row.meaning) ?? []), where[i]!]))
    const merged = {
      ...first,
      ...(byDefault.size > 1 && { default: [...byDefault].map(([value, which]) => `${value} (${which.join(', ')})`).join(', ') }),
      // A shared option that means something else per variant (a url of another scheme) says what for each.
      ...(byMeaning.size > 1 && { meaning: [...byMeaning].map(([text, which]) => `${which.map(code).join(', ')}: ${text}`).join('; ') }),
    }
    const key = where.length === labels.length ? '' : where.join(',')
    groups.set(key, [...(groups.get(key) ?? []), merged])
  }
  const out = [table([discriminatorRow, ...(groups.get('') ?? [])])]
  for (const [key, rows] of groups) {
    if (key !== '') out.push(`${listed(key.split(','))} only:`, table(rows))
  }
  return out
}

/** One section: its heading, its description, the template's note, and its tables. */
function renderSection (name: string, node: JsonSchema, note: string | undefined): string {
  const list = node.type === 'array' && isSchema(node.items)
  const body = list ? node.items as JsonSchema : node
  const parts = [`## ${code(list ? `${name}[]` : name)}`]
  const { meaning } = describe(node)
  if (meaning !== '') parts.push(`${meaning.charAt(0).toUpperCase()}${meaning.slice(1)}.`)
  if (note !== undefined && note !== '') parts.push(note)
  const variants = schemas(body.oneOf)
  if (variants.length > 0) {
    parts.push(...variantTables(variants, body.default))
  } else {
    const needed = required(body)
    const defaults = isSchema(body.default) ? body.default : {}
    const rows = properties(body).flatMap(([option, schema]) =>
      rowsOf(option, schema, option, { inherited: defaults[option], isRequired: needed.includes(option) }))
    parts.push(table(rows))
  }
  return parts.join('\n\n')
}

/** The template: its header, then each section's note by name. */
export function parseTemplate (text: string): { header: string, notes: Map<string, string> } {
  const [header, ...rest] = text.split(SECTION_MARK)
  const notes = new Map<string, string>()
  for (let i = 0; i < rest.length; i += 2) notes.set(rest[i]!, rest[i + 1]!.trim())
  return { header: header!.trim(), notes }
}

/** The page's exact text. */
export function renderConfigDocs (template = readFileSync(CONFIG_DOCS_TEMPLATE, 'utf8')): string {
  const { header, notes } = parseTemplate(template)
  const sections = properties(configJsonSchema())
  const unknown = [...notes.keys()].filter((name) => !sections.some(([section]) => section === name))
  if (unknown.length > 0) throw new Error(`scripts/configuration-template.md has notes for sections the schema does not have: ${unknown.join(', ')}`)
  const banner = '<!-- Generated from src/config/schema.ts and scripts/configuration-template.md by `npm run config:schema`; do not edit. -->'
  return `${[banner, header, ...sections.map(([name, node]) => renderSection(name, node, notes.get(name)))].join('\n\n')}\n`
}

async function main (): Promise<void> {
  await writeFile(CONFIG_DOCS_FILE, renderConfigDocs())
  process.stdout.write(`wrote ${CONFIG_DOCS_FILE}\n`)
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main()
