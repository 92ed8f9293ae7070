/**
 * agent-sandbox as a library. The CLI is a thin client of the same code.
 *
 *   import {SandboxManager} from 'agent-sandbox'
 *   const manager = new SandboxManager()
 *   const sandbox = await manager.createSandbox({workspacePath: '/src/app', network: 'firewall'})
 *   const {exitCode, stdout} = await sandbox.execute('npm', ['test'], {timeoutMs: 600_000})
 *   await sandbox.destroy()
 */
export {SandboxManager} from './lib/sandbox/manager.js'
export type {CreateSandboxOptions, ExecuteOptions, ExecuteResult, SandboxHandle, SandboxManagerOptions} from './lib/sandbox/manager.js'
export type {Limits} from './lib/sandbox/ephemeral-container.js'
export type {NetworkMode} from './lib/config/schema.js'
export {
  SandboxError,
  UsageError,
  ConfigError,
  EngineError,
  NotInitialisedError,
  ImageMissingError,
  BuildError,
  NotReadyError,
  ConflictError,
  ExitCode,
} from './lib/errors.js'
