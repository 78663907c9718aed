// The line chart writer of the benchmark page (bench/lib/svg-chart.ts): a well-formed, accessible SVG document
// whose lines go through the given points in order, the same bytes for the same numbers, and a precise error for
// numbers it cannot draw.
import type { Document, Element } from '@xmldom/xmldom'
import { describe, expect, it } from 'vitest'
import { niceTicks } from '../../bench/lib/chart-axis.ts'
import { lineChartSvg, type LineChart } from '../../bench/lib/svg-chart.ts'
import { byClass, parseSvg, seriesOf } from '../helpers/svg.ts'

/** The x pixel of each point of the first series. */
function pointXs (doc: Document): number[] {
  return byClass(byClass(doc, 'g', 'series')[0]!, 'g', 'point').map((p) => {
    const shape = p.firstChild as Element
    return Number(shape.getAttribute('cx') ?? Number(shape.getAttribute('x')) + 3.2)
  })
}

const STORED_TASKS: LineChart = {
  id: 'stored-tasks',
  title: 'tasks/get p50 by stored tasks',
  x: { label: 'stored tasks', values: [1000, 10000, 100000], scale: 'log' },
  y: { label: 'p50 (ms)' },
  series: [
    { name: 'tasks/get p50 memory', values: [0.21, 0.22, 0.24] },
    { name: 'tasks/get p50 <sqlite> & "co"', values: [0.31, null, 0.4] },
  ],
  guides: [{ value: 0.3, label: 'budget ≤ 0.3 ms' }],
}

describe('lineChartSvg()', () => {
  it('writes a well-formed SVG that names itself: <title>, <desc> with every value, and aria-labelledby', () => {
    const svg = lineChartSvg(STORED_TASKS)
    const doc = parseSvg(svg)
    const root = doc.documentElement!
    expect(root.tagName).toBe('svg')
    expect(root.getAttribute('role')).toBe('img')
    expect(root.getAttribute('aria-labelledby')).toBe('stored-tasks-title stored-tasks-desc')
    expect(doc.getElementById('stored-tasks-title')!.textContent).toBe('tasks/get p50 by stored tasks')
    expect(doc.getElementById('stored-tasks-desc')!.textContent).toBe('Line chart of p50 (ms) against stored tasks. ' +
      'tasks/get p50 memory: 0.21 at 1,000, 0.22 at 10,000, 0.24 at 100,000. ' +
      'tasks/get p50 <sqlite> & "co": 0.31 at 1,000, missing at 10,000, 0.4 at 100,000. Dashed line: budget ≤ 0.3 ms (0.3).')
    expect(Number(root.getAttribute('width'))).toBeGreaterThan(0)
    expect(Number(root.getAttribute('height'))).toBeGreaterThan(0)
  })

  it('draws one line per series through its points in x order, with a gap where a value is missing', () => {
    const doc = parseSvg(lineChartSvg(STORED_TASKS))
    expect(seriesOf(doc)).toEqual([
      { name: 'tasks/get p50 memory', points: [[1000, 0.21], [10000, 0.22], [100000, 0.24]] },
      { name: 'tasks/get p50 <sqlite> & "co"', points: [[1000, 0.31], [100000, 0.4]] },
    ])
    const [memory, sqlite] = byClass(doc, 'g', 'series')
    expect(memory!.getElementsByTagName('path')[0]!.getAttribute('d')).toMatch(/^M[\d.]+ [\d.]+L[\d.]+ [\d.]+L[\d.]+ [\d.]+$/)
    // Two points with a missing one between them: no line joins them across the gap.
    expect(sqlite!.getElementsByTagName('path')).toHaveLength(0)
    const legend = byClass(doc, 'g', 'legend-entry').map((g) => g.getElementsByTagName('text')[0]!.textContent)
    expect(legend).toEqual(['tasks/get p50 memory', 'tasks/get p50 <sqlite> & "co"', 'budget ≤ 0.3 ms'])
  })

  it('draws a guide as a dashed line across the plot', () => {
    const doc = parseSvg(lineChartSvg(STORED_TASKS))
    const [guide] = byClass(doc, 'g', 'guide')
    expect(guide!.getAttribute('data-value')).toBe('0.3')
    expect(guide!.getElementsByTagName('line')[0]!.getAttribute('stroke-dasharray')).toBe('6 4')
  })

  it('places x values by their logarithm on a log scale, by value on a linear one, one step apart on an ordinal one', () => {
    const log = pointXs(parseSvg(lineChartSvg(STORED_TASKS)))
    expect(log[1]! - log[0]!).toBeCloseTo(log[2]! - log[1]!, 0)
    const linear = pointXs(parseSvg(lineChartSvg({ ...STORED_TASKS, x: { ...STORED_TASKS.x, values: [100, 1000, 5000], scale: 'linear' } })))
    expect((linear[1]! - linear[0]!) / (linear[2]! - linear[0]!)).toBeCloseTo(900 / 4900, 2)
    const ordinal = pointXs(parseSvg(lineChartSvg({ ...STORED_TASKS, x: { ...STORED_TASKS.x, values: [1, 2, 50], scale: 'ordinal' } })))
    expect(ordinal[1]! - ordinal[0]!).toBeCloseTo(ordinal[2]! - ordinal[1]!, 0)
  })

  it('writes the same bytes for the same chart, with every coordinate rounded to a tenth of a pixel', () => {
    const svg = lineChartSvg(STORED_TASKS)
    expect(lineChartSvg(structuredClone({ ...STORED_TASKS, x: { ...STORED_TASKS.x, format: undefined } }))).toBe(svg)
    const coordinates = [...svg.matchAll(/ (?:x|y|x1|x2|y1|y2|cx|cy)="([^"]+)"/g)].map((m) => m[1]!)
    expect(coordinates.length).toBeGreaterThan(20)
    for (const value of coordinates) expect(value).toMatch(/^-?\d+(\.\d)?$/)
  })

  it('draws a single run as a point in the middle, and an all-zero series on a 0-based axis', () => {
    const doc = parseSvg(lineChartSvg({ id: 'one', title: 'one run', x: { label: 'run', values: [0], scale: 'ordinal' }, y: { label: 'ratio' }, series: [{ name: 'a', values: [0] }] }))
    expect(seriesOf(doc)).toEqual([{ name: 'a', points: [[0, 0]] }])
  })

  it('refuses what it cannot draw, saying what is wrong', () => {
    const bad = (change: Partial<LineChart>): () => string => () => lineChartSvg({ ...STORED_TASKS, ...change })
    expect(bad({ x: { label: 'n', values: [1000, 1000, 10] } })).toThrow('x values must ascend: value 1 (1000) is not above value 0 (1000)')
    expect(bad({ x: { label: 'n', values: [0, 10, 100], scale: 'log' } })).toThrow('x value 0 is 0: a log scale takes only values above 0')
    expect(bad({ series: [{ name: 'short', values: [1, 2] }] })).toThrow("chart 'stored-tasks': series 'short' has 2 values for 3 x values")
    expect(bad({ series: [{ name: 'nan', values: [1, Number.NaN, 2] }] })).toThrow("series 'nan' value 1 is NaN, not a finite number or null")
    expect(bad({ series: [] })).toThrow("chart 'stored-tasks' has no series")
    expect(bad({ id: 'Has Spaces' })).toThrow("chart id 'Has Spaces' must be lowercase letters, digits and single dashes")
  })
})

describe('niceTicks()', () => {
  it('gives round steps of 1, 2 or 5 that cover the range', () => {
    expect(niceTicks(0, 0.61)).toEqual([0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7])
    expect(niceTicks(0, 100_000)).toEqual([0, 20_000, 40_000, 60_000, 80_000, 100_000])
    expect(niceTicks(0, 0)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1])
    expect(niceTicks(-0.4, 1.6)).toEqual([-0.5, 0, 0.5, 1, 1.5, 2])
  })
})
