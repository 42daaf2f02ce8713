// A real browser renders a gpuflame profile in Grafana's own flame graph
// component. Usage: node flamegraph_browser_test.mjs FOLDED UNIT SCREENSHOT.png
//   FOLDED      a folded-stacks file gpuflame wrote (e.g. torch_memory.inuse_space.folded)
//   UNIT        Grafana unit of the values (bytes, ns, short)
//   GPUFLAME_EXPECT_ROWS='[["symbol", "64 MiB"], ...]' rows its table must show
// Asserts that the component accepted the frame and that its function table
// (in the DOM) lists the expected frames with their values; saves a screenshot.
import { build } from "esbuild";
import { launchChromium } from "./chromium.mjs";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { foldedFileToFrame } from "./pyroscope_frame.mjs";

const [folded, unit, screenshot] = process.argv.slice(2);
const here = dirname(fileURLToPath(import.meta.url));
const fail = (msg) => { console.error(`FAIL: ${msg}`); process.exit(1); };

const rows = foldedFileToFrame(folded);
if (rows.length < 2) fail(`no stacks in ${folded}`);
const total = rows[0].value;

// One self-contained HTML file: the bundle inline, the frame as data.
const out = await build({
  entryPoints: [join(here, "flamegraph_page.jsx")],
  bundle: true, write: false, minify: true, format: "iife", platform: "browser",
  define: { "process.env.NODE_ENV": '"production"', global: "window" },
  loader: { ".js": "jsx", ".css": "empty", ".ttf": "empty", ".woff": "empty", ".woff2": "empty", ".svg": "dataurl" },
  alias: { "react-router-dom": join(here, "empty_module.js") },
  logLevel: "error",
});
const dir = mkdtempSync(join(tmpdir(), "gpuflame-grafana-"));
const page = join(dir, "index.html");
writeFileSync(page, `<!doctype html><html><head><meta charset="utf-8"></head><body><div id="root"></div>
<script>window.GPUFLAME_FRAME = ${JSON.stringify(rows)}; window.GPUFLAME_UNIT = ${JSON.stringify(unit)};</script>
<script>${out.outputFiles[0].text.replace(/<\/script/g, "<\\/script")}</script></body></html>`);

const browser = await launchChromium();
const errors = [];
try {
  const tab = await browser.newPage({ viewport: { width: 1600, height: 950 } });
  tab.on("pageerror", (e) => errors.push(String(e)));
  await tab.goto(`file://${page}`);
  // The flame graph draws on a canvas; the function table is DOM.
  await tab.waitForSelector("canvas", { timeout: 30000 });
  await tab.waitForSelector('[role="table"], table', { timeout: 30000 });
  await tab.waitForTimeout(500);
  const text = await tab.evaluate(() => document.body.innerText);
  if (errors.length) fail(`page errors: ${errors.join("; ")}`);
  if (/Data does not have/.test(text)) fail(`the component rejected the frame: ${text.slice(0, 300)}`);
  // Every frame of the five largest stacks' leaves and their callers must be
  // in the table, with the total shown in Grafana's own unit formatting.
  const expected = rows.slice(1).sort((a, b) => b.value - a.value).slice(0, 5).map((r) => r.label);
  for (const label of expected) if (!text.includes(label)) fail(`function table lacks "${label}"`);
  // [label, formatted total] pairs: the table row of that symbol must show
  // that total, formatted by Grafana from the frame's unit.
  const rowsExpected = JSON.parse(process.env.GPUFLAME_EXPECT_ROWS || "[]");
  const tableRows = await tab.evaluate(() =>
    [...document.querySelectorAll('[role="row"], tr')].map((r) => r.innerText.replace(/\s+/g, " ").trim()));
  for (const [label, total] of rowsExpected) {
    const row = tableRows.find((r) => r.startsWith(label + " ") || r.includes(" " + label + " "));
    if (!row) fail(`no table row for "${label}" among ${tableRows.length} rows`);
    if (!row.includes(total)) fail(`row "${row}" does not show ${total}`);
  }
  await tab.screenshot({ path: screenshot, fullPage: false });
  console.log(`ok: ${rows.length} rows, total ${total}, frames found: ${expected.join(" | ")}; screenshot ${screenshot}`);
} finally {
  await browser.close();
}
