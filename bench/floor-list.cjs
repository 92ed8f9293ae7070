#!/usr/bin/env node
// The least a node program can do for `agent-sandbox list --json`: start, make the
// same one Engine API call over the socket, print the answer. No parsing, no
// settings, no error handling. The bench's `list-floor` row times it against
// `docker ps` to show where a node CLI's floor is (docs/PERFORMANCE.md).
// CommonJS, like the CLI's own entry and fast path.
'use strict'
const {request} = require('node:http')

const socketPath = (process.env.DOCKER_HOST || 'unix:///var/run/docker.sock').replace(/^unix:\/\//, '')
const filters = encodeURIComponent(JSON.stringify({label: ['dev.agent-sandbox.managed=true', 'dev.agent-sandbox.kind=sandbox']}))
request({socketPath, path: `/containers/json?all=1&filters=${filters}`}, (res) => {
  const chunks = []
  res.on('data', (chunk) => chunks.push(chunk))
  res.on('end', () => process.stdout.write(Buffer.concat(chunks)))
}).end()
