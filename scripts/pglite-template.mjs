// Makes the template new embedded databases start from (adapters/sql/pgliteTemplate.ts).
// Run by `npm install` and `npm ci` (the "prepare" script). It never fails the install:
// without a template a new database is made by initdb and migrated, only more slowly.
try {
  const { existsSync } = await import("node:fs")
  const { makeTemplate, templateFile } = await import("../adapters/sql/pgliteTemplate.ts")
  const file = templateFile()
  if (file !== undefined && existsSync(file)) console.log(`PGlite template: ${file} (kept)`)
  else console.log(`PGlite template: ${await makeTemplate()}`)
} catch (error) {
  console.log(
    `PGlite template not made (${error instanceof Error ? error.message : String(error)}); new embedded databases run initdb`
  )
}
