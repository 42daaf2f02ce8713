// How fast the flame graph page (exporters/files/flamegraph.html) draws a
// large profile in headless Chromium: a synthetic call tree of about 94,000
// nodes (two processes, Python frames with several lines each), put into a
// page that gpuflame wrote (its data block replaced), then timed: the first
// draw, a zoom, a search, the inverted view, a sandwich and a resize.
// Nothing is asserted: timings are for reading (CONTRIBUTING: no timing tests).
// Usage: node bench/flamegraph_page_benchmark.mjs PAGE.html [NODES]
//   PAGE.html  any flamegraph.html that gpuflame wrote (or the template itself)
import { readFileSync, writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launchChromium } from "../tests/deploy/chromium.mjs";

const [page, nodesArg] = process.argv.slice(2);
const target = Number(nodesArg || 94000);

// A deterministic tree: mulberry32, so every run draws the same profile.
let seed = 42;
const rand = () => { seed |= 0; seed = (seed + 0x6d2b79f5) | 0; let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
const frames = [["total", "marker", ""], ["python3 (pid 100)", "process", ""], ["worker (pid 101)", "process", ""]];
for (let i = 0; i < 3000; i++)
  frames.push(i % 5 === 4 ? [`lib_fn_${i}`, "native", "/usr/lib/libfoo.so"] : [`Module${i % 40} > fn_${i}`, "python", `/src/mod${i % 40}.py`]);
let count = 0;
function grow(depth) {
  count++;
  const f = 3 + Math.floor(rand() * (frames.length - 3));
  const kids = [];
  const fanout = depth < 3 ? 8 : depth < 14 ? (rand() < 0.55 ? 2 : 1) : rand() < 0.3 ? 1 : 0;
  for (let i = 0; i < fanout && count < target; i++) kids.push(grow(depth + 1));
  const self = kids.length ? Math.floor(rand() * 1000) : 1000 + Math.floor(rand() * 100000);
  const total = self + kids.reduce((s, k) => s + k[1], 0);
  const node = [f, total, kids.sort((a, b) => b[1] - a[1])];
  if (frames[f][1] === "python") node.push(0, rand() < 0.5 ? 10 + (f % 90) : [12, Math.ceil(total / 2), Math.ceil(self / 2), 40, total - Math.ceil(total / 2), self - Math.ceil(self / 2)]);
  return node;
}
const procs = [];
for (const p of [1, 2]) { const kids = []; while (count < target * p / 2) kids.push(grow(1)); procs.push([p, kids.reduce((s, k) => s + k[1], 0), kids]); }
const root = [0, procs[0][1] + procs[1][1], procs];
const data = { frames, notes: [], growth: [], profiles: [{ name: "process_cpu", default_type: "cpu", samples: count, processes: 2,
  period_type: "cpu", period: 10309278, duration_ns: 60e9, comments: [], types: [{ type: "cpu", unit: "nanoseconds", root }] }] };

const html = readFileSync(page, "utf8").replace(
    /(<script id="gpuflame-data" type="application\/json">)[\s\S]*?(<\/script>)/, (_, a, b) => a + JSON.stringify(data).replace(/</g, "\\u003c") + b);
const file = join(mkdtempSync(join(tmpdir(), "gf-bench-")), "page.html");
writeFileSync(file, html);

const browser = await launchChromium();
try {
  const tab = await browser.newPage({ viewport: { width: 1600, height: 900 } });
  const errors = [];
  tab.on("pageerror", (e) => errors.push(String(e)));
  const t0 = Date.now();
  await tab.goto(`file://${file}`);
  await tab.waitForFunction(() => document.querySelectorAll("#graph .node").length > 0);
  const load = Date.now() - t0;
  const drawn = await tab.evaluate(() => document.querySelectorAll("#graph .node").length);
  // Each step: what the page's script takes (a draw is synchronous), and the
  // browser's layout and paint after it (two animation frames).
  const step = (fn) => tab.evaluate(async (src) => {
    const t = performance.now();
    try { (0, eval)(`(${src})`)(); } catch (e) { return null; }  // a page without the feature
    const script = performance.now() - t;
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    return [script, performance.now() - t];
  }, fn.toString());
  const results = { [`load to first draw (${count} nodes, ${drawn} drawn)`]: [load, load] };
  results["draw again"] = await step(() => render());
  results["zoom into the first process"] = await step(() => document.querySelectorAll("#graph .node")[1].click());
  results["search 'fn_1'"] = await step(() => { const s = document.getElementById("search"); s.value = "fn_1"; s.dispatchEvent(new Event("input")); });
  await step(() => { const s = document.getElementById("search"); s.value = ""; s.dispatchEvent(new Event("input")); });
  results["inverted view (first time)"] = await step(() => { const v = document.getElementById("view"); v.value = "inverted"; v.dispatchEvent(new Event("change")); });
  results["sandwich of the top function"] = await step(() => { const v = document.getElementById("view"); v.value = "sandwich"; v.dispatchEvent(new Event("change")); });
  results["back to the flame graph"] = await step(() => { const v = document.getElementById("view"); v.value = "flame"; v.dispatchEvent(new Event("change")); });
  results["resize to 800 px"] = await step(() => { document.getElementById("graph").style.width = "800px"; render(); });
  for (const [k, r] of Object.entries(results)) {
    if (!r) { console.log(`${k.padEnd(48)} (not in this page)`); continue; }
    const [script, all] = r;
    console.log(`${k.padEnd(48)} script ${script.toFixed(0).padStart(5)} ms   with layout+paint ${all.toFixed(0).padStart(5)} ms`);
  }
  if (errors.length) { console.error(`page errors: ${errors.join("; ")}`); process.exitCode = 1; }
} finally {
  await browser.close();
}
