#!/usr/bin/env node
// Development entry: the same as run.cjs; build first with `npm run build`.
import {execute} from '@oclif/core'

await execute({development: true, dir: import.meta.url})
