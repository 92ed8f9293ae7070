import {describe, expect, it} from 'vitest'
import {isPodmanPing, rootlessPodmanInfo} from '../../src/lib/engine/index.js'
import {buildHelperSpec} from '../../src/lib/sandbox/spec-companions.js'
import {toCreateOptions} from '../../src/lib/sandbox/spec-render.js'
import {Labels} from '../../src/lib/workspace.js'
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

describe('buildHelperSpec', () => {
  it('makes helpers root with the given capabilities only, no new privileges, and the engine\'s user namespace (keep-id on rootless Podman)', () => {
    const spec = buildHelperSpec({
      kind: 'provision',
      name: 'h',
      baseTag: 'latest',
      network: 'none',
      capAdd: ['CHOWN'],
      mounts: [{type: 'volume', source: 'v', target: '/t', readOnly: false}],
      entrypoint: ['/usr/local/sbin/provision-shelf'],
      cmd: ['a'],
      userns: 'keep-id',
    })
    const create = toCreateOptions(spec)
    expect(create).toMatchObject({
      name: 'h',
      Image: 'agent-sandbox-base:latest',
      User: '0:0',
      Entrypoint: ['/usr/local/sbin/provision-shelf'],
      Cmd: ['a'],
      Labels: {[Labels.managed]: 'true', [Labels.kind]: 'provision'},
      HostConfig: {CapDrop: ['ALL'], CapAdd: ['CHOWN'], SecurityOpt: ['no-new-privileges'], NetworkMode: 'none', UsernsMode: 'keep-id', Privileged: false},
    })
    expect(toCreateOptions({...spec, userns: undefined}).HostConfig).not.toHaveProperty('UsernsMode')
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
