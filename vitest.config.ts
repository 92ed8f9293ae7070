import {defineConfig} from 'vitest/config'

/** Suites on a real engine: shared images and volumes, so files run one after another, in one process. */
const onEngine = {
  environment: 'node',
  pool: 'forks',
  poolOptions: {forks: {singleFork: true}},
  sequence: {concurrent: false},
  testTimeout: 300_000,
  hookTimeout: 600_000,
} as const

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          environment: 'node',
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          // It restarts the engine daemon: its own suite, alone on its engine (scripts/test-all.sh engine-restart).
          exclude: ['test/integration/engine-restart.test.ts'],
          ...onEngine,
          globalSetup: ['test/integration/global-setup.ts'],
        },
      },
      {
        test: {
          name: 'engine-restart',
          include: ['test/integration/engine-restart.test.ts'],
          ...onEngine,
          globalSetup: ['test/integration/global-setup.ts'],
        },
      },
      {
        test: {
          // The CLI as an ordinary user on rootless Podman (scripts/setup-rootless-podman.sh).
          name: 'rootless',
          include: ['test/rootless/**/*.test.ts'],
          ...onEngine,
        },
      },
    ],
  },
})
