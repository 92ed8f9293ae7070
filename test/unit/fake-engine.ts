/**
 * A type-checked fake of the engine seam for unit tests: the parts a test
 * gives (vi.fn() mocks with the real signatures), and every other method
 * failing loudly, so a test that reaches further than it set up fails instead
 * of passing on `undefined`. No casts: the parts must match the interfaces.
 */
import type {ContainerClient, ContainerInfo, Engine, EngineCli, ImageClient, VolumeClient} from '../../src/lib/engine/index.js'
import type {Endpoint} from '../../src/lib/engine/endpoint.js'

export interface FakeParts {
  containers?: Partial<ContainerClient>
  images?: Partial<ImageClient>
  volumes?: Partial<VolumeClient>
  cli?: Partial<EngineCli>
  kind?: 'docker' | 'podman'
}

function unfaked<T extends object>(area: string, given: Partial<T> = {}): T {
  return new Proxy(given, {
    get(target, key) {
      if (key in target) return target[key as keyof typeof target]
      if (typeof key === 'symbol' || key === 'then') return undefined
      return () => {
        throw new Error(`the fake engine has no ${area}.${key}: give it in fakeEngine({${area}: {${key}}})`)
      }
    },
  }) as T
}

const endpoint: Endpoint = {kind: 'socket', socketPath: '/fake.sock', dockerHost: 'unix:///fake.sock'}

export function fakeEngine(parts: FakeParts = {}): Engine {
  return {
    endpoint,
    endpointSource: 'default socket',
    containers: unfaked<ContainerClient>('containers', parts.containers),
    images: unfaked<ImageClient>('images', parts.images),
    volumes: unfaked<VolumeClient>('volumes', parts.volumes),
    cli: unfaked<EngineCli>('cli', {binary: 'docker', ...parts.cli}),
    ping: async () => undefined,
    kind: async () => parts.kind ?? 'docker',
    version: async () => '0.0.0-fake',
    userns: async () => undefined,
    selinux: async () => false,
  }
}

/** A full ContainerInfo with the fields a test names, the rest empty. */
export function containerInfo(fields: Partial<ContainerInfo> & {name: string}): ContainerInfo {
  return {
    id: fields.name,
    image: 'img',
    imageId: 'sha256:0',
    running: false,
    status: 'exited',
    exitCode: 0,
    oomKilled: false,
    startedAt: '',
    finishedAt: '',
    labels: {},
    env: [],
    user: '',
    workdir: '/',
    mounts: [],
    capAdd: [],
    capDrop: [],
    privileged: false,
    securityOpt: [],
    networkMode: 'bridge',
    memory: 0,
    nanoCpus: 0,
    pidsLimit: 0,
    ports: [],
    ...fields,
  }
}
