/**
 * Quoting for POSIX shells: the commands a hint tells the user to run, and the
 * `docker run` lines `show-run` prints, must paste back into a shell unchanged.
 */

/** One argument as a shell word: bare when it has only safe characters, otherwise single-quoted. */
export function quoteArg(text: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`
}
