/** The engine's view of our resources, mapped from inspect JSON to our own types. */

export interface MountSpec {
  type: 'bind' | 'volume' | 'tmpfs'
  /** Host path (bind) or volume name (volume); unused for tmpfs. */
  source: string
  target: string
  readOnly: boolean
  /** SELinux relabelling of a bind mount: `shared` (:z, any of our containers) or `private` (:Z, this one only). */
  relabel?: 'shared' | 'private'
  /** tmpfs mount options (default `mode=755`). */
  options?: string
}

export interface ContainerInfo {
  id: string
  name: string
  image: string
  imageId: string
  running: boolean
  status: string
  exitCode: number
  oomKilled: boolean
  startedAt: string
  finishedAt: string
  labels: Record<string, string>
  env: string[]
  user: string
  workdir: string
  mounts: MountSpec[]
  capAdd: string[]
  capDrop: string[]
  privileged: boolean
  securityOpt: string[]
  networkMode: string
  memory: number
  nanoCpus: number
  pidsLimit: number
  ports: string[]
}

export interface ContainerSummary {
  id: string
  name: string
  image: string
  state: string
  status: string
  labels: Record<string, string>
}

export interface ImageInfo {
  id: string
  tags: string[]
  labels: Record<string, string>
  created: string
}

export interface VolumeInfo {
  name: string
  labels: Record<string, string>
  mountpoint: string
}

export interface ExecResult {
  exitCode: number
  stdout: string
  stderr: string
}

export type EngineKind = 'docker' | 'podman'
