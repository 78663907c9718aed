/**
 * Writes `config/gateway.schema.json`, the JSON Schema of the gateway's YAML configuration, from the zod
 * schema in src/config/schema.ts (the one source of truth). Editors use it for completion and checks:
 * `# yaml-language-server: $schema=./gateway.schema.json` at the top of a configuration file.
 *
 *   npm run config:schema
 *
 * test/unit/config-schema.test.ts regenerates the schema in memory and fails when the committed file differs.
 */
import { writeFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { z } from 'zod'
import { configSchema } from '../src/config/schema.ts'

export const SCHEMA_FILE = fileURLToPath(new URL('../config/gateway.schema.json', import.meta.url))

/** What units.ts accepts, spelled for JSON Schema (no regex flags there, so units match in either case). */
export const DURATION_PATTERN = '^\\s*\\d+(\\.\\d+)?\\s*([mM][sS]|[sSmMhHdD])\\s*$'
export const SIZE_PATTERN = '^\\s*\\d+(\\.\\d+)?\\s*([bB]|[kKmMgG][bB])\\s*$'

type JsonSchema = Record<string, unknown>

/**
 * Durations and sizes are `number | string` in zod and parsed by a transform, which JSON Schema cannot
 * express; their string branch gets the pattern of the accepted spellings instead. They are recognised by
 * the unit hint that units.ts appends to their description. The only number a duration takes is 0 (any
 * other needs a unit).
 */
function addUnitPatterns (json: JsonSchema): void {
  const description = typeof json.description === 'string' ? json.description : ''
  const isDuration = description.includes('(duration:')
  const pattern = isDuration ? DURATION_PATTERN : description.includes('(size:') ? SIZE_PATTERN : undefined
  if (pattern === undefined || !Array.isArray(json.anyOf)) return
  json.anyOf = (json.anyOf as JsonSchema[]).map((branch) => {
    if (branch.type === 'string') return { ...branch, pattern }
    return isDuration ? { const: 0 } : branch
  })
}

/** The JSON Schema of what may be written in the YAML file (zod's input side: defaults, strings for durations). */
export function configJsonSchema (): JsonSchema {
  const generated = z.toJSONSchema(configSchema, {
    io: 'input',
    target: 'draft-2020-12',
    override: (ctx) => addUnitPatterns(ctx.jsonSchema as JsonSchema),
  }) as JsonSchema
  const { $schema, ...rest } = generated
  return {
    $schema,
    title: 'mcp-task-gateway configuration',
    description: 'Generated from src/config/schema.ts by `npm run config:schema`; do not edit. Every option and its default: config/gateway.example.yaml.',
    ...rest,
  }
}

/** The file's exact text: two-space JSON with a final newline. */
export function renderConfigJsonSchema (): string {
  return `${JSON.stringify(configJsonSchema(), null, 2)}\n`
}

async function main (): Promise<void> {
  await writeFile(SCHEMA_FILE, renderConfigJsonSchema())
  process.stdout.write(`wrote ${SCHEMA_FILE}\n`)
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main()
