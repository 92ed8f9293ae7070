/** Files shipped with the package: the base image context and the templates. */
import {fileURLToPath} from 'node:url'

// dist/lib/assets.js and src/lib/assets.ts both sit two levels below the package root.
const root = new URL('../../', import.meta.url)

export const packageRoot = fileURLToPath(root)
export const baseImageDir = fileURLToPath(new URL('base-image/', root))
export const templatesDir = fileURLToPath(new URL('templates/', root))
