// Reading the SVG charts of the benchmark page (bench/lib/svg-chart.ts) back in tests: parsed as XML, and the
// series they draw with their points.
import { DOMParser, type Document, type Element } from '@xmldom/xmldom'

/** Parses `svg` as XML, failing on any warning or error: a browser shows nothing of a malformed SVG image. */
export function parseSvg (svg: string): Document {
  // xmldom takes a bare & as text, where a browser's XML parser refuses the whole image.
  const bare = /&(?!(?:amp|lt|gt|quot|apos|#\d+|#x[\da-fA-F]+);)/.exec(svg)
  if (bare !== null) throw new Error(`a bare & at offset ${bare.index}: ${svg.slice(bare.index, bare.index + 30)}`)
  return new DOMParser({ onError: (level, message) => { throw new Error(`${level}: ${message}`) } }).parseFromString(svg, 'image/svg+xml')
}

/** The elements of `doc` named `tag` that carry `className`, in document order. */
export function byClass (doc: Document | Element, tag: string, className: string): Element[] {
  return Array.from(doc.getElementsByTagName(tag)).filter((e) => e.getAttribute('class') === className)
}

/** Each series of a parsed chart: its name and its points (x, y) in document order. */
export function seriesOf (doc: Document): Array<{ name: string, points: Array<[number, number]> }> {
  return byClass(doc, 'g', 'series').map((g) => ({
    name: g.getAttribute('data-series')!,
    points: byClass(g, 'g', 'point').map((p) => [Number(p.getAttribute('data-x')), Number(p.getAttribute('data-y'))]),
  }))
}
