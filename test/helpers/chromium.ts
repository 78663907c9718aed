import { accessSync, constants, statSync } from 'node:fs'
import { delimiter, join } from 'node:path'

/** The names a Chromium binary goes by on the PATH: Debian's package, Ubuntu's and Fedora's. */
const NAMES = ['chromium', 'chromium-browser']

/** What to do when no Chromium is found: the package to install, or the variable to set. */
export const MISSING_CHROMIUM = 'test/e2e/dashboard.test.ts and test/e2e/bench-charts-browser.test.ts drive a headless Chromium and found none: ' +
  'install the `chromium` package first (Debian: `sudo apt-get install chromium`; Ubuntu: `sudo apt-get install ' +
  'chromium-browser`), or set CHROMIUM_PATH to a Chromium or Chrome binary. ' +
  'Every other test file runs without it; see docs/development.md.'

function executable (file: string): boolean {
  try {
    accessSync(file, constants.X_OK)
    return statSync(file).isFile()
  } catch {
    return false
  }
}

/**
 * The Chromium the dashboard test drives: CHROMIUM_PATH when set (it must be an executable file), else the
 * first `chromium` or `chromium-browser` on the PATH. Throws a message naming the package to install when
 * there is none, so a machine without a browser learns what to do instead of reading a launch error.
 */
export function chromiumPath (env: NodeJS.ProcessEnv = process.env): string {
  const configured = env.CHROMIUM_PATH
  if (configured !== undefined && configured !== '') {
    if (executable(configured)) return configured
    throw new Error(`CHROMIUM_PATH is '${configured}', which is not an executable file. ${MISSING_CHROMIUM}`)
  }
  for (const dir of (env.PATH ?? '').split(delimiter).filter((d) => d !== '')) {
    for (const name of NAMES) {
      const file = join(dir, name)
      if (executable(file)) return file
    }
  }
  throw new Error(MISSING_CHROMIUM)
}
