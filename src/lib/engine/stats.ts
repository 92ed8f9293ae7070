/**
 * A container's stats sample as the engine's stats endpoint gives it, in the
 * numbers `watch` shows: CPU in percent of one CPU and memory without the
 * page cache, computed as `docker stats` computes them.
 */
/** One stats sample: the process count, and CPU and memory when the engine gave them. */
export interface ContainerStats {
  pids: number
  pidsLimit: number
  /** CPU use since the engine's previous sample, in percent of one CPU (200 = two CPUs busy). */
  cpuPercent?: number
  /** Memory in use without the page cache, as `docker stats` counts it. */
  memoryBytes?: number
  /** The CPU counters of this sample (ns), for a percentage between two samples where the engine gives no previous one (Podman). */
  cpu?: CpuCounters
}

/** A container's CPU time (ns) and when the engine read it (ms since the epoch). */
export interface CpuCounters {
  total: number
  readAt: number
}

export interface RawStats {
  /** When the engine read the sample (ISO 8601). */
  read?: string
  pids_stats?: {current?: number; limit?: number}
  cpu_stats?: {cpu_usage?: {total_usage?: number}; system_cpu_usage?: number; online_cpus?: number}
  precpu_stats?: {cpu_usage?: {total_usage?: number}; system_cpu_usage?: number}
  memory_stats?: {usage?: number; stats?: {inactive_file?: number; total_inactive_file?: number}}
}

/** CPU percent and memory from a stats answer, computed as `docker stats` computes them. Pure. */
export function usageOf(raw: RawStats): Pick<ContainerStats, 'cpuPercent' | 'memoryBytes' | 'cpu'> {
  const out: Pick<ContainerStats, 'cpuPercent' | 'memoryBytes' | 'cpu'> = {}
  const now = raw.cpu_stats
  if (now?.cpu_usage?.total_usage !== undefined) {
    out.cpu = {total: now.cpu_usage.total_usage, readAt: (raw.read && Date.parse(raw.read)) || Date.now()}
    // Podman's one-shot answer has no previous sample (its precpu is zeros): no percentage from it alone.
    const cpu = now.cpu_usage.total_usage - (raw.precpu_stats?.cpu_usage?.total_usage ?? 0)
    const system = (now.system_cpu_usage ?? 0) - (raw.precpu_stats?.system_cpu_usage ?? 0)
    if (raw.precpu_stats?.system_cpu_usage && system > 0 && cpu >= 0) out.cpuPercent = (cpu / system) * (now.online_cpus || 1) * 100
  }
  const usage = raw.memory_stats?.usage
  if (usage !== undefined) out.memoryBytes = Math.max(0, usage - (raw.memory_stats?.stats?.inactive_file ?? raw.memory_stats?.stats?.total_inactive_file ?? 0))
  return out
}

/** CPU use between two samples, in percent of one CPU (CPU time over the time between them); undefined when no time passed. Pure. */
export function cpuPercentBetween(before: CpuCounters, after: CpuCounters): number | undefined {
  const cpu = after.total - before.total
  const ms = after.readAt - before.readAt
  return ms > 0 && cpu >= 0 ? (cpu / (ms * 1e6)) * 100 : undefined
}
