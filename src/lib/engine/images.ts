/** Images, through the engine API. Builds go through the CLI (streamed output). */
import type {ImageInspectInfo} from 'dockerode'
import type {EngineApi} from './api.js'
import {isNotFound} from './containers.js'
import type {ImageInfo} from './types.js'

export interface ImageClient {
  inspect(name: string): Promise<ImageInfo | undefined>
  remove(name: string): Promise<void>
}

/** The same calls on the engine API directly (see api.ts). */
export class ApiImages implements ImageClient {
  constructor(private readonly api: EngineApi) {}

  async inspect(name: string): Promise<ImageInfo | undefined> {
    try {
      const raw = await this.api.json<ImageInspectInfo>('GET', `/images/${name}/json`)
      return {id: raw.Id, tags: raw.RepoTags ?? [], labels: raw.Config?.Labels ?? {}, created: raw.Created}
    } catch (error) {
      if (isNotFound(error)) return undefined
      throw error
    }
  }

  async remove(name: string): Promise<void> {
    try {
      await this.api.json('DELETE', `/images/${name}`, {query: {force: true}})
    } catch (error) {
      if (isNotFound(error)) return
      throw error
    }
  }
}
