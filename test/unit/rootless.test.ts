import {describe, expect, it} from 'vitest'
import {helperRunArgs, isPodmanPing, rootlessPodmanInfo} from '../../src/lib/engine/index.js'
import {droppedLimits} from '../../src/lib/sandbox/lifecycle.js'

describe('rootless Podman detection', () => {
  it('recognises Podman by its ping headers, whatever their case', () => {
    expect(isPodmanPing({'libpod-api-version': '4.3.1', 'api-version': '1.41'})).toBe(true)
    expect(isPodmanPing({'Libpod-Api-Version': '5.0.0'})).toBe(true)
    expect(isPodmanPing({'api-version': '1.41', 'docker-experimental': 'false'})).toBe(false)
  })

  it('reads rootless from Podman /info only (rootless Docker has no keep-id)', () => {
    expect(rootlessPodmanInfo({Rootless: true})).toBe(true)
    expect(rootlessPodmanInfo({Rootless: false})).toBe(false)
    expect(rootlessPodmanInfo({SecurityOptions: ['name=seccomp,profile=default', 'name=rootless']})).toBe(false)
    expect(rootlessPodmanInfo({})).toBe(false)
  })
})

describe('helperRunArgs', () => {
  const args = ['run', '--rm', '--name', 'x', 'img', 'sh']
  it('leaves everything alone without a user namespace, and anything but run', () => {
    expect(helperRunArgs('docker', args, undefined, false)).toEqual({binary: 'docker', argv: args})
    expect(helperRunArgs('docker', ['build', '.'], 'keep-id', false)).toEqual({binary: 'docker', argv: ['build', '.']})
  })

  it('runs helpers in keep-id through podman (the docker CLI refuses it), unless a CLI is pinned', () => {
    expect(helperRunArgs('docker', args, 'keep-id', false)).toEqual({binary: 'podman', argv: ['run', '--userns', 'keep-id', ...args.slice(1)]})
    expect(helperRunArgs('/opt/my-podman', args, 'keep-id', true)).toEqual({binary: '/opt/my-podman', argv: ['run', '--userns', 'keep-id', ...args.slice(1)]})
  })
})

describe('droppedLimits', () => {
  const applied = {memory: 64 * 1024 ** 2, nanoCpus: 1e9, pidsLimit: 64}
  it('names each requested limit the engine did not apply', () => {
    const spec = {limits: {memoryBytes: 64 * 1024 ** 2, nanoCpus: 1e9, pids: 64}}
    expect(droppedLimits(spec, applied)).toEqual([])
    expect(droppedLimits(spec, {memory: 0, nanoCpus: 0, pidsLimit: 0})).toEqual(['memory', 'cpus', 'pids'])
    expect(droppedLimits({limits: {pids: 64}}, {memory: 0, nanoCpus: 0, pidsLimit: 0})).toEqual(['pids'])
    expect(droppedLimits({limits: {}}, {memory: 0, nanoCpus: 0, pidsLimit: 0})).toEqual([])
    expect(droppedLimits(spec, undefined)).toEqual(['memory', 'cpus', 'pids'])
  })
})
