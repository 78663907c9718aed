// Renders the allow-list as the table of docs/upstreams.md, "What differs through the gateway", between two
// markers. test/unit/transparency-doc.test.ts fails when the page is not what this renders; to rewrite it:
//
//   npx tsx test/transparency/allow-list-doc.ts
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { ALLOW_LIST, type AllowEntry } from './allow-list.ts'

export const DOC_PATH = fileURLToPath(new URL('../../docs/upstreams.md', import.meta.url))
export const BEGIN = '<!-- transparency allow-list: generated from test/transparency/allow-list.ts -->'
export const END = '<!-- end of transparency allow-list -->'

function cell (text: string): string {
  return text.replace(/\|/g, '\\|')
}

function row (entry: AllowEntry): string {
  const servers = [entry.server].flat().map((s) => `\`${s}\``).join(', ')
  const note = entry.goesAwayWith !== undefined
    ? ` (to be fixed: issue 28, item ${entry.goesAwayWith.join(', ')})`
    : entry.bug === true ? ' (a bug, to be fixed)' : ''
  const timing = entry.sometimes === true ? ' Depends on timing: not in every session.' : ''
  return `| ${servers} | ${entry.era ?? 'both'} | \`${cell(entry.item)}\` | ${cell(entry.reason)}${timing}${note} |`
}

/** The generated part of the page: the allow-list, by design first, then what is still to be fixed. */
export function renderAllowList (): string {
  const byDesign = ALLOW_LIST.filter((e) => e.goesAwayWith === undefined && e.bug !== true)
  const toFix = ALLOW_LIST.filter((e) => e.goesAwayWith !== undefined || e.bug === true)
  const table = (entries: AllowEntry[]): string[] => ['| servers | era | item | why |', '|---|---|---|---|', ...entries.map(row)]
  return [
    BEGIN,
    '',
    'By design:',
    '',
    ...table(byDesign),
    '',
    'Still to be fixed:',
    '',
    ...table(toFix),
    '',
    END,
  ].join('\n')
}

/** The page with its generated part replaced by what the allow-list renders now. */
export function renderedPage (page: string): string {
  const start = page.indexOf(BEGIN)
  const end = page.indexOf(END)
  if (start < 0 || end < start) throw new Error(`${DOC_PATH} has no "${BEGIN}" … "${END}" section`)
  return `${page.slice(0, start)}${renderAllowList()}${page.slice(end + END.length)}`
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(DOC_PATH, renderedPage(readFileSync(DOC_PATH, 'utf8')))
}
