// Every relative link in README.md, CHANGELOG.md and docs/*.md points at a file that exists and, with a #fragment, at a heading
// of that file, so the docs cannot rot when a section moves or is renamed. Three pages are written alongside
// other changes (tracing, reload, dashboard): a link to one of them is accepted while the file does not exist,
// and checked like any other once it does.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const EXPECTED_PAGES = ['docs/tracing.md', 'docs/reload.md', 'docs/dashboard.md']

interface Link { from: string, line: number, target: string }

/** GitHub's heading ids: lower case, punctuation dropped, spaces as hyphens, repeats numbered -1, -2, … */
function headingIds (markdown: string): Set<string> {
  const ids = new Set<string>()
  const seen = new Map<string, number>()
  for (const line of outsideFences(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (!heading) continue
    const base = heading[1]!.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    ids.add(count === 0 ? base : `${base}-${count}`)
  }
  return ids
}

/** The lines of a Markdown text, with those inside fenced code blocks left empty. */
function outsideFences (markdown: string): string[] {
  let fenced = false
  return markdown.split('\n').map((line) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced
      return ''
    }
    return fenced ? '' : line
  })
}

function linksOf (from: string, markdown: string): Link[] {
  const links: Link[] = []
  outsideFences(markdown).forEach((text, i) => {
    const line = text.replace(/`[^`]*`/g, (span) => span.replaceAll(/[[\]()]/g, ' '))
    for (const match of line.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)|^\s*\[[^\]]+\]:\s*(\S+)/g)) {
      const target = match[1] ?? match[2]!
      if (!/^[a-z][a-z0-9+.-]*:/i.test(target)) links.push({ from, line: i + 1, target })
    }
  })
  return links
}

/** The links among `pages` (paths relative to the root, with their text) that point at nothing. */
function brokenLinks (pages: Map<string, string>, read: (path: string) => string | undefined): string[] {
  const broken: string[] = []
  for (const [from, markdown] of pages) {
    for (const { line, target } of linksOf(from, markdown)) {
      const [path = '', fragment] = target.split('#')
      const file = path === '' ? from : relative(ROOT, resolve(ROOT, dirname(from), decodeURIComponent(path)))
      const text = pages.get(file) ?? read(file)
      const where = `${from}:${line} → ${target}`
      if (text === undefined) {
        if (!EXPECTED_PAGES.includes(file)) broken.push(`${where}: no file ${file}`)
      } else if (fragment !== undefined && file.endsWith('.md') && !headingIds(text).has(fragment)) {
        broken.push(`${where}: ${file} has no heading #${fragment}`)
      }
    }
  }
  return broken
}

function readFromDisk (path: string): string | undefined {
  const full = join(ROOT, path)
  if (!existsSync(full)) return undefined
  return path.endsWith('.md') ? readFileSync(full, 'utf8') : ''
}

function documentation (): Map<string, string> {
  const files = ['README.md', 'CHANGELOG.md', ...readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)]
  return new Map(files.map((file) => [file, readFileSync(join(ROOT, file), 'utf8')]))
}

describe('links in README.md and docs/', () => {
  it('all point at a file that exists and a heading it has', () => {
    const pages = documentation()
    expect(pages.size).toBeGreaterThan(8)
    expect(brokenLinks(pages, readFromDisk)).toEqual([])
  })

  it('are found and checked: a missing file, a missing heading, a renamed heading, an expected page', () => {
    const pages = new Map([
      ['README.md', '[a](docs/a.md#the-store) [b](docs/b.md) [c](docs/a.md#2026-07-28-clients-1) [d](docs/tracing.md#spans)\n' +
        '```\n[not a link](docs/nowhere.md)\n```\n[e](#mcp-task-gateway) [f](https://example.com/x.md) [g](docs/a.md#store)'],
      ['docs/a.md', '# A\n\n## The store\n\n## 2026-07-28 clients\n\n## 2026-07-28 clients\n\n## `upstreams[]`\n\n[h](../README.md#quick-start) [i](a.md#upstreams)'],
    ])
    expect(brokenLinks(pages, () => undefined)).toEqual([
      'README.md:1 → docs/b.md: no file docs/b.md',
      'README.md:5 → #mcp-task-gateway: README.md has no heading #mcp-task-gateway',
      'README.md:5 → docs/a.md#store: docs/a.md has no heading #store',
      'docs/a.md:11 → ../README.md#quick-start: README.md has no heading #quick-start',
    ])
  })
})
