/**
 * A value that a configuration reload may replace while the gateway runs: the parts that receive one read
 * it where they use it (each read goes through a getter of LiveSettings) and never keep a copy. `Live<T>` is
 * `T` to the compiler, so the hot path pays nothing; it tells a reader of a dependency list which values
 * follow a reload and which were fixed at start.
 */
export type Live<T> = T
