// Builds the console into dist/: code-split ES modules with hashed names
// under dist/assets/, and dist/index.html that loads the entry with a plain
// <script type=module src> (the CSP allows no inline script). The output is
// deterministic, so that CI can rebuild it and compare with what is
// committed. `node build.mjs --watch` rebuilds on change (serve it with
// `warren serve http --console-dir web/dist`).
import * as esbuild from "esbuild";
import { readFileSync, readdirSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { join, basename } from "node:path";

const here = new URL(".", import.meta.url).pathname;
const src = join(here, "src");
const out = join(here, "dist");

// Untrusted text (shell output, files, diffs) must never become HTML: no
// source file may use the HTML-parsing DOM APIs.
function checkNoHTMLSinks(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      checkNoHTMLSinks(p);
      continue;
    }
    const text = readFileSync(p, "utf8");
    for (const sink of ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "DOMParser", "createContextualFragment"]) {
      if (text.includes(sink)) {
        throw new Error(`${p} uses ${sink}: build DOM nodes with text instead (src/dom.ts)`);
      }
    }
  }
}

// The SDK's client validates tool outputs with AJV, which compiles
// schemas with new Function: the CSP forbids that, and it weighs more than
// the rest of the console. warren's own server is trusted for its schemas,
// so the provider is replaced by a module that checks nothing.
const noAjv = {
  name: "no-ajv",
  setup(build) {
    build.onResolve({ filter: /validation\/ajv-provider\.js$/ }, () => ({ path: "ajv-provider", namespace: "stub" }));
    build.onLoad({ filter: /.*/, namespace: "stub" }, () => ({
      contents: "export class AjvJsonSchemaValidator { getValidator() { return (data) => ({ valid: true, data, errorMessage: undefined }); } }",
      loader: "js",
    }));
  },
};

const writeIndex = {
  name: "index-html",
  setup(build) {
    build.onEnd((result) => {
      if (result.errors.length || !result.metafile) return;
      let js = "", css = "";
      for (const [file, info] of Object.entries(result.metafile.outputs)) {
        if (info.entryPoint === "src/main.ts") js = basename(file);
        if (file.endsWith(".css") && basename(file).startsWith("main-")) css = basename(file);
      }
      const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>warren</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/assets/${css}">
<script type="module" src="/assets/${js}"></script>
</head>
<body>
<div id="app"><p class="boot">Loading warren…</p></div>
<noscript>warren's console needs JavaScript.</noscript>
</body>
</html>
`;
      writeFileSync(join(out, "index.html"), html);
    });
  },
};

checkNoHTMLSinks(src);
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const options = {
  absWorkingDir: here,
  entryPoints: ["src/main.ts"],
  bundle: true,
  splitting: true,
  format: "esm",
  target: ["es2022"],
  minify: true,
  legalComments: "none",
  outdir: "dist/assets",
  entryNames: "[name]-[hash]",
  chunkNames: "chunk-[hash]",
  assetNames: "[name]-[hash]",
  metafile: true,
  charset: "utf8",
  logLevel: "info",
  plugins: [noAjv, writeIndex],
};
if (process.argv.includes("--watch")) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
} else {
  const result = await esbuild.build(options);
  writeFileSync(join(here, "meta.json"), JSON.stringify(result.metafile));
}
