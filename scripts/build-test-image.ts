/**
 * Builds the image test/e2e/container-image.test.ts starts, the way that test builds it (the Node 22 base image of
 * scripts/node-base-image.sh, then the project's Dockerfile with buildah), so that a CI run pays the cold build
 * (several minutes: `npm ci` and better-sqlite3 compiled inside the build) before the tests, which then reuse
 * buildah's layer cache. The tests build it themselves where this did not run.
 *
 *   npx tsx scripts/build-test-image.ts
 */
import { buildImage, IMAGE, nodeBaseImage } from '../test/helpers/image-build.ts'

const started = performance.now()
await buildImage(await nodeBaseImage())
console.info(`${IMAGE} built in ${((performance.now() - started) / 1000).toFixed(0)} s`)
