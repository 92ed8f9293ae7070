/**
 * "Has anything changed since this image was built?" for per-repo images.
 *
 * A build's key is one hash of everything the classic builder's cache looks at:
 * the build arguments and labels, every file of the context (path, type, mode,
 * content), and the ID of every image the Dockerfile starts from or copies from.
 * When the workspace image carries the same key, a build would only replay its
 * cache, so `agent-sandbox build` says so instead of running it.
 *
 * Whenever the outcome could depend on something outside those inputs (a
 * remote `ADD`, a parser directive, a variable that cannot be resolved, an
 * image not present locally) there is no key and the build always runs.
 */
import {createHash} from 'node:crypto'
import {lstatSync, readFileSync, readdirSync, readlinkSync} from 'node:fs'
import {join} from 'node:path'

export interface ContextEntry {
  path: string
  kind: 'file' | 'dir' | 'link'
  mode: number
  /** sha256 of a file's content, a link's target, or '' for a directory. */
  digest: string
}

/**
 * Files at the context's root that hold the sandbox's settings, not build
 * input: `firewall allow --save` or an edit of the settings must not make the
 * image stale. (A Dockerfile that copies one is not rebuilt when it changes.)
 */
const SETTINGS_FILES = new Set(['config.json'])

/** Every entry under `dir`, sorted by path, but the settings files at its root. */
export function readBuildContext(dir: string): ContextEntry[] {
  const entries: ContextEntry[] = []
  const walk = (rel: string) => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      if (!rel && SETTINGS_FILES.has(name)) continue
      const path = rel ? `${rel}/${name}` : name
      const full = join(dir, path)
      const stat = lstatSync(full)
      const mode = stat.mode & 0o7777
      if (stat.isSymbolicLink()) entries.push({path, kind: 'link', mode, digest: sha256(readlinkSync(full))})
      else if (stat.isDirectory()) {
        entries.push({path, kind: 'dir', mode, digest: ''})
        walk(path)
      } else entries.push({path, kind: 'file', mode, digest: sha256(readFileSync(full))})
    }
  }
  walk('')
  return entries
}

/**
 * The images a Dockerfile builds from (FROM, COPY/ADD --from, RUN --mount from=),
 * with build arguments substituted, leaving out its own stages. Undefined when
 * the build's inputs cannot be known from the Dockerfile and the context. Pure.
 */
export function externalImages(dockerfile: string, buildArgs: Record<string, string>): string[] | undefined {
  const lines = dockerfile.replaceAll('\r\n', '\n').split('\n')
  // Parser directives (escape, syntax) change how the rest is read: do not guess.
  for (const line of lines) {
    if (/^\s*#\s*[A-Za-z]+\s*=/.test(line)) return undefined
    if (!/^\s*#/.test(line)) break
  }
  const instructions: string[] = []
  let current = ''
  for (const line of lines) {
    if (current === '' && /^\s*(#|$)/.test(line)) continue
    if (current !== '' && /^\s*#/.test(line)) continue
    if (/\\\s*$/.test(line)) {
      current += `${line.replace(/\\\s*$/, '')} `
      continue
    }
    instructions.push(current + line)
    current = ''
  }
  if (current) instructions.push(current)

  const globals: Record<string, string> = {}
  const stages = new Set<string>()
  const images: string[] = []
  let seenFrom = false
  const substitute = (text: string, vars: Record<string, string>) =>
    text.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (whole, a: string | undefined, b: string | undefined) => {
      const name = (a ?? b) as string
      return Object.hasOwn(vars, name) ? vars[name] : whole
    })
  const external = (ref: string, vars: Record<string, string>): string | undefined | null => {
    const resolved = substitute(ref, vars)
    if (resolved.includes('$')) return undefined
    if (stages.has(resolved.toLowerCase()) || /^\d+$/.test(resolved) || resolved === 'scratch') return null
    return resolved
  }
  for (const instruction of instructions) {
    const [keyword = '', ...words] = instruction.trim().split(/\s+/)
    const verb = keyword.toUpperCase()
    if (verb === 'ARG' && !seenFrom) {
      for (const word of words) {
        const [name, ...value] = word.split('=')
        globals[name] = Object.hasOwn(buildArgs, name) ? buildArgs[name] : value.join('=')
      }
    } else if (verb === 'FROM') {
      seenFrom = true
      const [ref, as, stage] = words.filter((w) => !w.startsWith('--'))
      if (!ref) return undefined
      const image = external(ref, globals)
      if (image === undefined) return undefined
      if (image) images.push(image)
      if (as?.toUpperCase() === 'AS' && stage) stages.add(stage.toLowerCase())
    } else if (verb === 'COPY' || verb === 'ADD' || verb === 'RUN') {
      const sources: string[] = []
      for (const word of words) {
        const from = /^--from=(.+)$/.exec(word)?.[1] ?? (/^--mount=/.test(word) ? /(?:^|[=,])from=([^,]+)/.exec(word.slice(8))?.[1] : undefined)
        if (from) sources.push(from)
      }
      // A remote source is fetched at build time: its content is not in the context.
      if (verb === 'ADD' && words.some((w) => /^(https?:\/\/|git@|git:\/\/|ssh:\/\/)/i.test(w))) return undefined
      for (const ref of sources) {
        const image = external(ref, {...globals, ...buildArgs})
        if (image === undefined) return undefined
        if (image) images.push(image)
      }
    }
  }
  return [...new Set(images)]
}

/** One hash of a build's inputs. Pure. */
export function buildKey(input: {args: readonly string[]; context: readonly ContextEntry[]; imageIds: Record<string, string>}): string {
  const hash = createHash('sha256')
  hash.update(JSON.stringify({v: 1, args: input.args, context: input.context, images: Object.entries(input.imageIds).sort()}))
  return hash.digest('hex')
}

function sha256(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex')
}
