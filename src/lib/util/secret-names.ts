/**
 * Environment variable names that look like they hold a secret: their values
 * are shown masked (`config`, the widening report) or as a reference
 * (`show-run`'s `--env NAME`), never as they are.
 */
const SECRET_NAME = /(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|PRIVATE|CREDENTIAL|AUTH|COOKIE|SESSION)/i

export function looksSecret(name: string): boolean {
  return SECRET_NAME.test(name)
}
