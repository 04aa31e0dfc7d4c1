/**
 * The benchmarks' options: `--name=value` on the command line, else an
 * environment variable, else a default; a bad value stops the script with
 * exit status 2 and says which option.
 */

/** The value of `--name=...` on the command line, if given. */
export const flag = (name: string): string | undefined => {
  const prefix = `--${name}=`
  return process.argv.slice(2).find((arg) => arg.startsWith(prefix))?.slice(prefix.length)
}

/** `--name`, else the environment variable, else the default. */
export const option = (name: string, variable: string, fallback: string): string =>
  flag(name) ?? process.env[variable] ?? fallback

/** A whole number of at least `min`, or exit 2 naming the script's option. */
export const wholeNumber = (script: string, name: string, text: string, min: number): number => {
  const value = Number(text)
  if (!Number.isInteger(value) || value < min) {
    console.error(`${script}: --${name} must be a whole number of at least ${min}, not ${JSON.stringify(text)}`)
    process.exit(2)
  }
  return value
}
