// Builds dist/ from src/: one JavaScript bundle and one stylesheet, with
// fixed names (the Hub serves them with no-cache and an ETag, so no content
// hash is needed) and no source maps, so that the output is the same bytes
// on every machine: `go test ./web/console` rebuilds it and compares.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";

rmSync("dist", { recursive: true, force: true });
mkdirSync("dist/assets", { recursive: true });
await build({
  entryPoints: { app: "src/main.tsx" },
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  jsx: "automatic",
  jsxImportSource: "preact",
  outdir: "dist/assets",
  legalComments: "none",
  charset: "utf8",
  logLevel: "warning",
});
await build({
  entryPoints: { app: "src/style.css" },
  bundle: true,
  minify: true,
  outdir: "dist/assets",
  legalComments: "none",
  charset: "utf8",
  logLevel: "warning",
});
copyFileSync("index.html", "dist/index.html");
