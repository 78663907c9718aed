// The dashboard's browser test finds Chromium where an operator's machine has it, and a machine without one
// is told which package to install (README's quick start names it too), not handed a launch error.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { chromiumPath } from '../helpers/chromium.ts'

const dir = mkdtempSync(join(tmpdir(), 'chromium-path-'))
const empty = mkdtempSync(join(tmpdir(), 'chromium-path-empty-'))
const browser = join(dir, 'chromium-browser')
writeFileSync(browser, '#!/bin/sh\n')
chmodSync(browser, 0o755)

describe('chromiumPath()', () => {
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true })
    rmSync(empty, { recursive: true, force: true })
  })

  it('names the package to install when no Chromium is on the PATH', () => {
    expect(() => chromiumPath({ PATH: empty })).toThrow(/install the `chromium` package first \(Debian: `sudo apt-get install chromium`/)
  })

  it('finds chromium or chromium-browser on the PATH', () => {
    expect(chromiumPath({ PATH: [empty, dir].join(':') })).toBe(browser)
  })

  it('takes CHROMIUM_PATH first, and refuses one that is not an executable file', () => {
    expect(chromiumPath({ PATH: empty, CHROMIUM_PATH: browser })).toBe(browser)
    expect(() => chromiumPath({ PATH: dir, CHROMIUM_PATH: join(empty, 'nothing') })).toThrow(/CHROMIUM_PATH is '.*nothing', which is not an executable file/)
  })
})
