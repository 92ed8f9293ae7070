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

export interface CpuCounters {
  total: number
  system: number
  online: number
}

export interface RawStats {
  pids_stats?: {current?: number; limit?: number}
  cpu_stats?: {cpu_usage?: {total_usage?: number}; system_cpu_usage?: number; online_cpus?: number}
  precpu_stats?: {cpu_usage?: {total_usage?: number}; system_cpu_usage?: number}
  memory_stats?: {usage?: number; stats?: {inactive_file?: number; total_inactive_file?: number}}
}

/** CPU percent and memory from a stats answer, computed as `docker stats` computes them. Pure. */
export function usageOf(raw: RawStats): Pick<ContainerStats, 'cpuPercent' | 'memoryBytes' | 'cpu'> {
  const out: Pick<ContainerStats, 'cpuPercent' | 'memoryBytes' | 'cpu'> = {}
  const now = raw.cpu_stats
  if (now?.cpu_usage?.total_usage !== undefined && now.system_cpu_usage) {
    out.cpu = {total: now.cpu_usage.total_usage, system: now.system_cpu_usage, online: now.online_cpus || 1}
    // Podman's one-shot answer has no previous sample (its precpu is zeros): no percentage from it alone.
    const before = raw.precpu_stats
    if (before?.system_cpu_usage) {
      const percent = cpuPercentBetween({total: before.cpu_usage?.total_usage ?? 0, system: before.system_cpu_usage, online: out.cpu.online}, out.cpu)
      if (percent !== undefined) out.cpuPercent = percent
    }
  }
  const usage = raw.memory_stats?.usage
  if (usage !== undefined) out.memoryBytes = Math.max(0, usage - (raw.memory_stats?.stats?.inactive_file ?? raw.memory_stats?.stats?.total_inactive_file ?? 0))
  return out
}

/** CPU use between two samples, in percent of one CPU; undefined when no system time passed. Pure. */
export function cpuPercentBetween(before: CpuCounters, after: CpuCounters): number | undefined {
  const cpu = after.total - before.total
  const system = after.system - before.system
  return system > 0 && cpu >= 0 ? (cpu / system) * after.online * 100 : undefined
}
