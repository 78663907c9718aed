/**
 * The layers of src/, from the ground floor up (docs/architecture.md). A file may import from its own folder
 * and from any lower floor; folders on one floor are independent of each other. Each entry is a folder or a
 * single file of src/.
 */
export const LAYERS = [
  ['errors.ts'],
  ['wire'],
  ['config'],
  ['observability'],
  ['store'],
  ['auth', 'limits'],
  ['upstream'],
  ['catalog'],
  ['calls'],
  ['tasks'],
  ['dispatch'],
  ['cluster'],
  ['streams'],
  ['protocol/2025-11-25', 'protocol/2026-07-28'],
  ['http', 'reload'],
  ['admin'],
  ['gateway'],
  ['gateway.ts'],
  ['main.ts', 'healthcheck.ts'],
]

/** The bundled demo upstream is a program of its own: nothing of the gateway imports it. */
export const APART = ['demo']

const path = (place) => `./src/${place}`

/** `import-x/no-restricted-paths` zones: for each place, every higher place and every sibling on its floor. */
export function layerZones () {
  const zones = []
  LAYERS.forEach((floor, level) => {
    const above = LAYERS.slice(level + 1).flat()
    for (const place of floor) {
      const siblings = floor.filter((other) => other !== place)
      const from = [...above, ...siblings, ...APART].map(path)
      zones.push({
        target: path(place),
        from,
        message: `src/${place} is on floor ${level} of docs/architecture.md: it may import only from lower floors.`,
      })
    }
  })
  return zones
}
