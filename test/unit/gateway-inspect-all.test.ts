/**
 * gateway.inspectAll: the setting that intercepts every HTTPS connection. A
 * repository's own file may turn it on untrusted (it only narrows) but may
 * turn the user's `true` off only when trusted; the gateway container gets it
 * as one variable.
 */
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, beforeEach, describe, expect, it} from 'vitest'
import {loadSettings} from '../../src/lib/config/load.js'
import {mergeLayers, userConfigPath} from '../../src/lib/config/layers.js'
import {checkConfigFile, DEFAULTS} from '../../src/lib/config/schema.js'
import {recordTrust, snapshotDir, templateDockerfile} from '../../src/lib/config/trust.js'
import {workspaceChanges} from '../../src/lib/config/widening.js'
import {ConfigError} from '../../src/lib/errors.js'

describe('gateway.inspectAll', () => {
  it('is a boolean, false by default, merged from the highest layer that sets it', () => {
    expect(DEFAULTS.gateway).toEqual({inspectAll: false})
    expect(checkConfigFile({gateway: {inspectAll: 'yes'}})).toMatchObject({success: false, issue: {field: 'gateway.inspectAll'}})
    expect(checkConfigFile({gateway: {inspectEverything: true}})).toMatchObject({success: false, issue: {field: 'gateway', message: 'unknown field "inspectEverything"'}})
    const merged = mergeLayers([['user', {gateway: {inspectAll: true}}], ['workspace', {gateway: {}}]])
    expect(merged.settings.gateway).toEqual({inspectAll: true})
    expect(merged.sources.gateway).toEqual(['user'])
  })

  it('turning it off over the user\'s true widens; turning it on narrows; the same value changes nothing', () => {
    const lower = (inspectAll: boolean) => ({...structuredClone(DEFAULTS), gateway: {inspectAll}})
    expect(workspaceChanges({gateway: {inspectAll: false}}, lower(true))).toEqual([{key: 'gateway.inspectAll', summary: 'true -> false', widens: true}])
    expect(workspaceChanges({gateway: {inspectAll: true}}, lower(false))).toEqual([{key: 'gateway.inspectAll', summary: 'false -> true', widens: false}])
    expect(workspaceChanges({gateway: {inspectAll: true}}, lower(true))).toEqual([])
  })

  describe('from a repository\'s own file', () => {
    let root = ''
    let env: NodeJS.ProcessEnv = {}
    let ws = ''
    beforeEach(() => {
      root = mkdtempSync(join(tmpdir(), 'agent-sandbox-inspect-'))
      env = {HOME: join(root, 'home'), XDG_CONFIG_HOME: join(root, 'cfg'), XDG_STATE_HOME: join(root, 'state')}
      ws = join(root, 'ws')
      mkdirSync(join(ws, '.agent-sandbox'), {recursive: true})
      writeFileSync(join(ws, '.agent-sandbox', 'Dockerfile'), templateDockerfile('latest'))
      mkdirSync(join(userConfigPath(env), '..'), {recursive: true})
    })
    afterEach(() => rmSync(root, {recursive: true, force: true}))
    const files = (user: boolean, workspace: boolean) => {
      writeFileSync(userConfigPath(env), JSON.stringify({gateway: {inspectAll: user}}))
      writeFileSync(join(ws, '.agent-sandbox', 'config.json'), JSON.stringify({gateway: {inspectAll: workspace}}))
    }

    it('cannot turn the user\'s true off untrusted: refused in one line naming the key; trusted it applies', () => {
      files(true, false)
      expect(() => loadSettings({workspacePath: ws, env})).toThrow(ConfigError)
      expect(() => loadSettings({workspacePath: ws, env})).toThrow(/gateway\.inspectAll \(true -> false\)/)
      recordTrust(ws, snapshotDir(ws), 'trust', env)
      expect(loadSettings({workspacePath: ws, env}).settings.gateway.inspectAll).toBe(false)
    })

    it('turns it on untrusted', () => {
      files(false, true)
      expect(loadSettings({workspacePath: ws, env}).settings.gateway.inspectAll).toBe(true)
    })
  })
})
