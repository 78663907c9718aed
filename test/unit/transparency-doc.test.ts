import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { DOC_PATH, renderedPage } from '../transparency/allow-list-doc.ts'

describe('docs/upstreams.md, What differs through the gateway', () => {
  it('lists exactly the entries of the transparency allow-list (npx tsx test/transparency/allow-list-doc.ts rewrites it)', () => {
    const page = readFileSync(DOC_PATH, 'utf8')
    expect(page).toBe(renderedPage(page))
  })
})
