/** The resource-limit flags as config values (no oclif here: the fast path uses it). Pure. */

export function limitsFrom(flags: {cpus?: string; memory?: string; 'pids-limit'?: number}): {memory?: string; cpus?: number; pids?: number} | undefined {
  const limits: {memory?: string; cpus?: number; pids?: number} = {}
  if (flags.memory !== undefined) limits.memory = flags.memory
  if (flags.cpus !== undefined) limits.cpus = Number(flags.cpus)
  if (flags['pids-limit'] !== undefined) limits.pids = flags['pids-limit']
  return Object.keys(limits).length ? limits : undefined
}
