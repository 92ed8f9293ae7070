/** Named volumes, through the engine API. */
import type {EngineApi} from './api.js'
import {isNotFound, labelFilters} from './containers.js'
import type {VolumeInfo} from './types.js'

export interface VolumeClient {
  inspect(name: string): Promise<VolumeInfo | undefined>
  ensure(name: string, labels: Record<string, string>): Promise<VolumeInfo>
  list(labels: Record<string, string>): Promise<VolumeInfo[]>
  remove(name: string): Promise<void>
}

interface RawVolume {
  Name: string
  Labels?: Record<string, string> | null
  Mountpoint: string
}

/** Volumes on the engine API (api.ts). */
export class ApiVolumes implements VolumeClient {
  constructor(private readonly api: EngineApi) {}

  async inspect(name: string): Promise<VolumeInfo | undefined> {
    try {
      const raw = await this.api.json<RawVolume>('GET', `/volumes/${name}`)
      return {name: raw.Name, labels: raw.Labels ?? {}, mountpoint: raw.Mountpoint}
    } catch (error) {
      if (isNotFound(error)) return undefined
      throw error
    }
  }

  async ensure(name: string, labels: Record<string, string>): Promise<VolumeInfo> {
    const existing = await this.inspect(name)
    if (existing) return existing
    // Creating an existing volume is a no-op on Docker, so a race here is harmless.
    const raw = await this.api.json<RawVolume>('POST', '/volumes/create', {body: {Name: name, Labels: labels}})
    return {name: raw.Name, labels: raw.Labels ?? labels, mountpoint: raw.Mountpoint}
  }

  async list(labels: Record<string, string>): Promise<VolumeInfo[]> {
    const raw = await this.api.json<{Volumes?: RawVolume[] | null}>('GET', '/volumes', {query: {filters: JSON.stringify({label: labelFilters(labels)})}})
    return (raw.Volumes ?? []).map((v) => ({name: v.Name, labels: v.Labels ?? {}, mountpoint: v.Mountpoint}))
  }

  async remove(name: string): Promise<void> {
    try {
      await this.api.json('DELETE', `/volumes/${name}`)
    } catch (error) {
      if (isNotFound(error)) return
      throw error
    }
  }
}
