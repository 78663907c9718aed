// docs/configuration.md is generated from the configuration schema and a hand-written template, and committed;
// these tests render it in memory so that it cannot go stale, and check that every option gets a documented row.
import { readFile } from 'node:fs/promises'
import { describe, expect, it } from 'vitest'
import { CONFIG_DOCS_FILE, CONFIG_DOCS_TEMPLATE, parseTemplate, renderConfigDocs } from '../../scripts/generate-config-docs.ts'

/** The option rows of the page: `| \`option\` | type | default | meaning |`. */
function optionRows (page: string): Array<{ option: string, type: string, default: string, meaning: string }> {
  const rows = []
  for (const line of page.split('\n')) {
    const match = /^\| (`[^|]+`) \| (.*?) \| (.*?) \| (.*) \|$/.exec(line)
    if (match) rows.push({ option: match[1]!.slice(1, -1), type: match[2]!, default: match[3]!, meaning: match[4]! })
  }
  return rows
}

describe('docs/configuration.md', () => {
  it('is what npm run config:schema generates from src/config/schema.ts and the template', async () => {
    const committed = await readFile(CONFIG_DOCS_FILE, 'utf8')
    expect(committed, 'docs/configuration.md is stale: run npm run config:schema').toBe(renderConfigDocs())
  })

  it('gives every option a type, a default and a meaning', () => {
    const rows = optionRows(renderConfigDocs())
    expect(rows.length).toBeGreaterThan(100)
    expect(rows.filter((row) => row.type === '' || row.type === 'any' || row.default === '' || row.meaning.length < 10).map((row) => row.option)).toEqual([])
  })

  it('writes durations, sizes, defaults that differ per transport, and options of one transport', () => {
    const page = renderConfigDocs()
    const rows = new Map(optionRows(page).map((row) => [row.option, row]))
    expect(rows.get('sessionIdleTimeout')).toMatchObject({ type: 'duration', default: '`1h`', meaning: expect.stringContaining('delete a session unused for this long') })
    expect(rows.get('maxBodyBytes')).toMatchObject({ type: 'size', default: '`4mb`' })
    expect(rows.get('timeouts.connect')).toMatchObject({ default: '`60s` (stdio), `10s` (streamable-http, sse)' })
    expect(rows.get('toolSettings.<tool>.idempotent')).toMatchObject({ type: 'boolean', default: '`false`' })
    expect(rows.get('requestsPerIp')).toMatchObject({ default: 'off' })
    expect(rows.get('kind')).toMatchObject({ default: '`sqlite`', meaning: expect.stringContaining('`redis`: a Redis server that several gateway processes share') })
    expect(page).toMatch(/`stdio` only:\n\n\| option \|[^\n]*\n[^\n]*\n\| `command` \|/)
    expect(page).toContain('`streamable-http` only:')
  })

  it('takes its prose from the template, and refuses a note for a section that does not exist', async () => {
    const template = await readFile(CONFIG_DOCS_TEMPLATE, 'utf8')
    const { header, notes } = parseTemplate(template)
    expect(renderConfigDocs()).toContain(header)
    for (const note of notes.values()) expect(renderConfigDocs()).toContain(note)
    expect(() => renderConfigDocs(`${template}\n<!-- section plugins -->\nNothing.\n`)).toThrow(/plugins/)
  })
})
