/**
 * Sizes and the engine's smallest limits, without the schema library: the spec (and so every
 * warm exec) needs them, and loading it costs start-up time (docs/PERFORMANCE.md).
 */

/** `4g`, `512m`, `1024` (bytes) to bytes. */
export function parseSize(text: string): number {
  const match = /^(\d+(?:\.\d+)?)([bkmg]?)$/i.exec(text.trim())
  if (!match) throw new Error(`not a size: ${text}`)
  const unit = {'': 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3}[match[2].toLowerCase() as '' | 'b' | 'k' | 'm' | 'g']
  return Math.round(Number(match[1]) * unit)
}

/**
 * The smallest limits the engine takes (Docker refuses less memory than 6m and
 * fewer CPUs than 0.01). The engine reads 0 as no limit at all, so a limit
 * that converted to 0 would remove the user's (a workspace's `"memory": "0"`
 * once did).
 */
export const MIN_MEMORY_BYTES = 6 * 1024 ** 2
export const MIN_CPUS = 0.01
