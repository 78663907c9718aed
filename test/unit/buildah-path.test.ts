// The image test on a machine without buildah fails at once naming what to install (as the dashboard's does
// for Chromium), instead of a spawn error from deep inside the build.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { MISSING_BUILDAH, requireBuildah } from '../helpers/image.ts'

const dir = mkdtempSync(join(tmpdir(), 'buildah-path-'))
const empty = mkdtempSync(join(tmpdir(), 'buildah-path-empty-'))
writeFileSync(join(dir, 'buildah'), '#!/bin/sh\n')
chmodSync(join(dir, 'buildah'), 0o755)

describe('requireBuildah()', () => {
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true })
    rmSync(empty, { recursive: true, force: true })
  })

  it('names the packages to install when buildah is not on the PATH', () => {
    expect(() => requireBuildah({ PATH: empty })).toThrow(MISSING_BUILDAH)
    expect(MISSING_BUILDAH).toContain('`sudo apt-get install buildah debootstrap`')
  })

  it('passes when buildah is on the PATH', () => {
    expect(() => requireBuildah({ PATH: [empty, dir].join(':') })).not.toThrow()
  })
})
