#!/usr/bin/env node
// The least a node program can do for `agent-sandbox stop`: start, make the one
// Engine API call that stops the container named in argv[2], exit. No workspace,
// no settings, no sidecars, no error handling. The bench's `stop-floor` row times
// it against `docker stop` of the same sandbox, to show where a node CLI's floor
// is for a command whose engine work is one stop (docs/PERFORMANCE.md).
'use strict'
const {request} = require('node:http')

const socketPath = (process.env.DOCKER_HOST || 'unix:///var/run/docker.sock').replace(/^unix:\/\//, '')
request({socketPath, method: 'POST', path: `/containers/${encodeURIComponent(process.argv[2])}/stop?t=3`}, (res) => res.resume()).end()
