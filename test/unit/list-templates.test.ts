import { describe, expect, it } from 'vitest'
import { ListTemplates } from '../../src/catalog/list-templates.ts'

describe('what new upstream sessions list, by list key', () => {
  it('keeps at most its limit of keys per upstream, the least recently used going first', () => {
    const templates = new ListTemplates<string>(2)
    templates.set('demo', 'a', 'A')
    templates.set('demo', 'b', 'B')
    expect(templates.get('demo', 'a')).toBe('A')
    templates.set('demo', 'c', 'C')
    expect([templates.get('demo', 'a'), templates.get('demo', 'b'), templates.get('demo', 'c')]).toEqual(['A', undefined, 'C'])
    for (let i = 0; i < 1000; i++) templates.set('demo', `key${i}`, String(i))
    expect(templates.size('demo')).toBe(2)
    // Each upstream has its own bound.
    templates.set('other', 'a', 'other A')
    expect([templates.size('demo'), templates.size('other')]).toEqual([2, 1])
  })

  it('never drops a pinned key (what the gateway\'s own session lists), and forgets an upstream as a whole', () => {
    const templates = new ListTemplates<string>(1)
    templates.set('demo', '{}', 'base', true)
    for (let i = 0; i < 10; i++) templates.set('demo', `key${i}`, String(i))
    expect(templates.get('demo', '{}')).toBe('base')
    expect(templates.any('demo')).toBe('base')
    expect(templates.size('demo')).toBe(2)
    templates.forget('demo')
    expect([templates.get('demo', '{}'), templates.any('demo'), templates.size('demo')]).toEqual([undefined, undefined, 0])
  })
})
