import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {rootCertificates} from 'node:tls'
import {afterAll, describe, expect, it} from 'vitest'
import {extraTrust} from '../../src/lib/util/tls.js'

const dir = mkdtempSync(join(tmpdir(), 'asb-tls-'))
afterAll(() => rmSync(dir, {recursive: true, force: true}))

describe('extraTrust', () => {
  it("is node's default store (undefined) without NODE_EXTRA_CA_CERTS", () => {
    expect(extraTrust({})).toBeUndefined()
    expect(extraTrust({NODE_EXTRA_CA_CERTS: ''})).toBeUndefined()
  })

  it("is node's bundled roots plus the whole file, as node builds its store at start-up", () => {
    const file = join(dir, 'corp.pem')
    const pem = '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n'
    writeFileSync(file, pem)
    const list = extraTrust({NODE_EXTRA_CA_CERTS: file})
    expect(list).toEqual([...rootCertificates, pem])
  })

  it('skips a file it cannot read, as node does', () => {
    expect(extraTrust({NODE_EXTRA_CA_CERTS: join(dir, 'missing.pem')})).toBeUndefined()
  })
})
