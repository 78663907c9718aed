import { afterEach, beforeEach } from 'vitest'
import type { GatewayStore } from '../../src/store/types.ts'

/**
 * Gives each test of the enclosing `describe` a fresh store: opened from `create` before it, handed to `use`
 * (which keeps the store, or the part of it its contract exercises), closed after it.
 */
export function freshStoreEachTest (create: () => Promise<GatewayStore>, use: (store: GatewayStore) => void): void {
  let current: GatewayStore | undefined
  beforeEach(async () => {
    current = await create()
    use(current)
  })
  afterEach(async () => {
    await current?.close()
    current = undefined
  })
}
