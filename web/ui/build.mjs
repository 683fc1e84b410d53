// Builds the UI into pkg/ui/assets (committed: go build needs no Node.js)
// and writes SOURCES.sha256, the digest of every input, which the Go test
// TestCommittedBundleMatchesSources recomputes: a source changed without
// `make ui` fails it.
import * as esbuild from "esbuild";
import { createHash } from "node:crypto";
import { copyFileSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

// UI_OUT: another directory (the Go test rebuilds there to compare).
const out = process.env.UI_OUT || "../../pkg/ui/assets";

await esbuild.build({
  entryPoints: ["src/main.ts", "src/style.css"],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020"],
  outdir: out,
  entryNames: "[name]",
  legalComments: "none",
  logLevel: "warning",
});
copyFileSync("src/index.html", join(out, "index.html"));

// The digest: sorted input paths, each with its bytes (same as the Go test).
const inputs = ["build.mjs", "package.json", "package-lock.json", "tsconfig.json",
  ...readdirSync("src").sort().map((f) => "src/" + f)].sort();
const h = createHash("sha256");
for (const f of inputs) {
  h.update(f + "\0");
  h.update(readFileSync(f));
  h.update("\0");
}
writeFileSync(join(out, "SOURCES.sha256"), h.digest("hex") + "\n");
