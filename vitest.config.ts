import {defineConfig} from 'vitest/config'

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
          environment: 'node',
          // One engine, shared images and volumes: run files one after another, in one process.
          pool: 'forks',
          poolOptions: {forks: {singleFork: true}},
          sequence: {concurrent: false},
          testTimeout: 300_000,
          hookTimeout: 600_000,
          globalSetup: ['test/integration/global-setup.ts'],
        },
      },
      {
        test: {
          // The CLI as an ordinary user on rootless Podman (scripts/setup-rootless-podman.sh).
          name: 'rootless',
          include: ['test/rootless/**/*.test.ts'],
          environment: 'node',
          pool: 'forks',
          poolOptions: {forks: {singleFork: true}},
          sequence: {concurrent: false},
          testTimeout: 300_000,
          hookTimeout: 600_000,
        },
      },
    ],
  },
})
