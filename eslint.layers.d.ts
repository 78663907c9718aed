/** The floors of src/, from the ground floor up (see eslint.layers.js). */
export declare const LAYERS: ReadonlyArray<readonly string[]>
/** Places of src/ that stand apart: nothing of the gateway imports them. */
export declare const APART: readonly string[]
export declare function layerZones (): Array<{ target: string, from: string[], message: string }>
