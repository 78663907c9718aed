// CHANGELOG.md has a section for the version package.json gives, newest first under the changes not yet
// released, and every version says what to do when upgrading to it.
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const changelog = readFileSync(`${ROOT}CHANGELOG.md`, 'utf8')
const { version } = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { version: string }

/** The `## ` sections, each with its `### ` headings. */
const sections = changelog.split(/^## /m).slice(1).map((text) => ({
  title: text.slice(0, text.indexOf('\n')).trim(),
  headings: [...text.matchAll(/^### (.+)$/gm)].map((m) => m[1]!.trim()),
}))

describe('CHANGELOG.md', () => {
  it("has Unreleased first, then a section for the package's version", () => {
    expect(sections.map((s) => s.title).slice(0, 2)).toEqual(['Unreleased', version])
  })

  it('says in every section what to do when upgrading', () => {
    for (const section of sections) expect({ section: section.title, upgrading: section.headings.includes('Upgrading') }).toEqual({ section: section.title, upgrading: true })
  })
})
