// The benchmark page's charts (bench/lib/svg-chart.ts) in a real browser (headless Chromium through
// playwright-core; CHROMIUM_PATH, else chromium on the PATH): Chromium's XML parser takes each SVG as it is, and
// the image shows at its size with its lines and legend inside it, as a reader of docs/benchmarks.md sees it.
import { chromium, type Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { curveChart } from '../../bench/lib/scale-curves.ts'
import { lineChartSvg } from '../../bench/lib/svg-chart.ts'
import { chromiumPath } from '../helpers/chromium.ts'

const CHROMIUM = {
  // Without a Chromium the file fails here, naming the package to install.
  executablePath: chromiumPath(),
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
}

const SVG = lineChartSvg(curveChart({
  id: 'stored-tasks.get',
  title: 'tasks/get p50 by stored tasks <all stores> & more',
  x: { label: 'stored tasks', values: [1000, 10000, 100000] },
  y: { label: 'tasks/get p50', unit: 'ms' },
  log: true,
  series: [
    { name: 'tasks/get p50 memory', values: [0.21, 0.22, 0.24] },
    { name: 'tasks/get p50 sqlite', values: [0.31, null, 0.4] },
    { name: 'tasks/get p50 redis', values: [0.5, 0.55, 0.61] },
  ],
}))

describe('a benchmark chart in a browser', () => {
  let browser: Browser

  beforeAll(async () => {
    browser = await chromium.launch(CHROMIUM)
  })
  afterAll(async () => {
    await browser?.close()
  })

  it('parses as XML in the browser and shows as an image of its own size', async () => {
    const page = await browser.newPage()
    // Code run in the page is given as text: this project's TypeScript has no DOM types.
    const parsed = await page.evaluate(`(() => {
      const doc = new DOMParser().parseFromString(${JSON.stringify(SVG)}, 'image/svg+xml')
      return { errors: doc.getElementsByTagName('parsererror').length, root: doc.documentElement.tagName }
    })()`)
    expect(parsed).toEqual({ errors: 0, root: 'svg' })

    await page.setContent(`<img id="chart" src="data:image/svg+xml;base64,${Buffer.from(SVG).toString('base64')}">`)
    const image = await page.evaluate(`(async () => {
      const img = document.getElementById('chart')
      await img.decode()
      return { width: img.naturalWidth, height: img.naturalHeight }
    })()`)
    const root = /<svg [^>]*width="(\d+)" height="(\d+)"/.exec(SVG)!
    expect(image).toEqual({ width: Number(root[1]), height: Number(root[2]) })
    await page.close()
  })

  it('draws every line, marker, label and legend entry inside the picture', async () => {
    const page = await browser.newPage({ viewport: { width: 800, height: 600 } })
    await page.setContent(SVG)
    const frame = (await page.locator('svg').boundingBox())!
    expect(frame.width).toBeGreaterThan(0)
    expect(frame.height).toBeGreaterThan(0)
    const boxes = async (selector: string): Promise<boolean[]> => Promise.all((await page.locator(selector).all()).map(async (element) => {
      const box = await element.boundingBox()
      return box !== null && box.width > 0 && box.x >= frame.x && box.x + box.width <= frame.x + frame.width &&
        box.y >= frame.y && box.y + box.height <= frame.y + frame.height
    }))
    expect(await boxes('g.series > path')).toEqual([true, true])
    expect(await boxes('g.point')).toEqual(Array(8).fill(true))
    expect(await boxes('g.legend-entry')).toEqual([true, true, true])
    const texts = await boxes('svg > text, g > text')
    expect(texts.length).toBeGreaterThan(10)
    expect(texts.every(Boolean)).toBe(true)
    await page.close()
  })
})
