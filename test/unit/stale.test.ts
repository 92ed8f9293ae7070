import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, describe, expect, it, vi} from 'vitest'
import type {ImageInfo} from '../../src/lib/engine/index.js'
import {currentBuildKey, repoBuildArgs} from '../../src/lib/images/build.js'
import {olderImageNotice, repoImageState} from '../../src/lib/images/stale.js'
import {describeWorkspace} from '../../src/lib/workspace.js'
import {fakeEngine} from './fake-engine.js'

const dir = mkdtempSync(join(tmpdir(), 'stale-'))
afterAll(() => rmSync(dir, {recursive: true, force: true}))
const ws = describeWorkspace(join(dir, 'app'))
mkdirSync(join(ws.path, '.agent-sandbox'), {recursive: true})
writeFileSync(join(ws.path, '.agent-sandbox', 'Dockerfile'), 'ARG BASE_IMAGE_TAG=latest\nFROM agent-sandbox-base:${BASE_IMAGE_TAG}\nRUN true\n')

const image = (id: string, labels: Record<string, string> = {}): ImageInfo => ({id, tags: [], labels, created: ''})

function engineWith(images: Record<string, ImageInfo>) {
  const inspect = vi.fn(async (ref: string) => images[ref])
  return fakeEngine({images: {inspect}})
}

describe('repoImageState', () => {
  const {image: name, args, buildArgs} = repoBuildArgs(ws, 'latest')
  const base = image('sha256:base')

  it('is missing without an image, current when its build key matches, stale when it does not', async () => {
    expect((await repoImageState({engine: engineWith({'agent-sandbox-base:latest': base})}, ws, 'latest')).state).toBe('missing')
    const engine = engineWith({'agent-sandbox-base:latest': base})
    const key = await currentBuildKey(engine, join(ws.path, '.agent-sandbox'), args, buildArgs, {'agent-sandbox-base:latest': 'sha256:base'})
    expect(key).toBeTruthy()
    const current = {'agent-sandbox-base:latest': base, [name]: image('sha256:repo', {'dev.agent-sandbox.build-key': key as string})}
    expect(await repoImageState({engine: engineWith(current)}, ws, 'latest')).toEqual({image: name, id: 'sha256:repo', state: 'current'})
    // The base image rebuilt: another ID.
    expect((await repoImageState({engine: engineWith({...current, 'agent-sandbox-base:latest': image('sha256:newbase')})}, ws, 'latest')).state).toBe('stale')
    // An image from before build keys.
    expect((await repoImageState({engine: engineWith({...current, [name]: image('sha256:repo')})}, ws, 'latest')).state).toBe('stale')
  })

  it('is unknown without the base image: nothing to rebuild from', async () => {
    const {image: n} = repoBuildArgs(ws, 'latest')
    expect((await repoImageState({engine: engineWith({[n]: image('sha256:repo')})}, ws, 'latest')).state).toBe('unknown')
  })
})

describe('olderImageNotice', () => {
  it('names a sandbox on another image than the workspace\'s, with the commands that recreate it', () => {
    expect(olderImageNotice(ws, {name: 'sbx', imageId: 'sha256:old'}, 'sha256:new')).toBe(
      `sbx runs an older image than ${repoBuildArgs(ws, 'x').image}; recreate it to use the new one: agent-sandbox stop ${ws.path} && agent-sandbox start ${ws.path}`,
    )
    expect(olderImageNotice(ws, {name: 'sbx', imageId: 'sha256:old'}, 'sha256:new', 'feat x')).toContain(`stop ${ws.path} --branch 'feat x' && agent-sandbox start ${ws.path} --branch 'feat x'`)
  })

  it('says nothing when it runs on the current image, or there is none', () => {
    expect(olderImageNotice(ws, {name: 'sbx', imageId: 'sha256:new'}, 'sha256:new')).toBeUndefined()
    expect(olderImageNotice(ws, {name: 'sbx', imageId: 'new'}, 'sha256:new')).toBeUndefined()
    expect(olderImageNotice(ws, {name: 'sbx', imageId: 'sha256:old'}, undefined)).toBeUndefined()
  })
})
