// speedscope (npm), a reader we did not write, imports a gpuflame timeline
// in headless Chromium. Usage: node timeline_browser_test.mjs TRACE.json.gz SCREENSHOT.png
// The trace is of tests/workloads/timeline.py (simulated CUDA: exact GPU
// times). Checked in speedscope's own views: one profile per thread and
// track, named from the trace's metadata; its sandwich table (DOM) lists
// six gemms of 300 us on GPU 0 stream 7, three 8 us copies on stream 0, the
// marked phases alone on the phases track, the frames of both on the main
// thread; and speedscope says nothing of spans ending out of order.
import { launchChromium } from "./chromium.mjs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const [trace, screenshot] = process.argv.slice(2);
const here = dirname(fileURLToPath(import.meta.url));
const fail = (msg) => { console.error(`FAIL: ${msg}`); process.exit(1); };
const GEMM = "void cutlass::Kernel<cutlass::gemm::kernel::Gemm>(cutlass::gemm::kernel::Gemm::Params)";

// speedscope's times as microseconds ("300.00µs", "1.80ms", "8.00µs").
function micros(text) {
  const m = /^([\d.]+)\s*(ns|µs|us|ms|s)\b/.exec(text.trim());
  if (!m) return NaN;
  return parseFloat(m[1]) * { ns: 1e-3, "µs": 1, us: 1, ms: 1e3, s: 1e6 }[m[2]];
}

const browser = await launchChromium();
const warnings = [];
try {
  const tab = await browser.newPage({ viewport: { width: 1600, height: 950 } });
  tab.on("pageerror", (e) => warnings.push(`page error: ${e}`));
  tab.on("console", (m) => { if (/Tried to end|Doing nothing/.test(m.text())) warnings.push(m.text()); });
  await tab.goto(`file://${join(here, "node_modules/speedscope/dist/release/index.html")}`);
  await tab.setInputFiles("#file", trace);
  // The toolbar names the profile shown and how many there are: "NAME (1/4)".
  const title = async () => (await tab.evaluate(() => document.body.innerText)).split("\n")
    .find((l) => /\(\d+\/\d+\)\s*$/.test(l)) || "";
  let first = "";
  for (let i = 0; i < 100 && !first; i++) { await tab.waitForTimeout(100); first = await title(); }
  if (!first) fail("speedscope did not import the trace");
  const count = Number(/\/(\d+)\)\s*$/.exec(first)[1]);
  await tab.keyboard.press("3");  // the sandwich view: a table of frames with their times
  const profiles = {};
  for (let i = 0; i < count; i++) {
    await tab.waitForTimeout(300);
    const name = (await title()).replace(/\s*\(\d+\/\d+\)\s*$/, "");
    profiles[name] = await tab.evaluate(() =>
      [...document.querySelectorAll("tr")].map((r) => [...r.querySelectorAll("td")].map((c) => c.innerText.trim()))
        .filter((cells) => cells.length >= 3 && /%\)$/.test(cells[0]))  // not the profile list's rows
        .map(([total, self, symbol]) => ({ total, self, symbol })));
    await tab.keyboard.press("n");  // the next profile
  }
  const names = Object.keys(profiles);
  console.log(`speedscope profiles: ${names.join(" | ")}`);
  const find = (pattern) => names.find((n) => pattern.test(n)) || fail(`no profile like ${pattern}: ${names.join(" | ")}`);
  // speedscope names frames by name and args: one row per kernel run.
  const rows = (profile, prefix) => profiles[profile].filter((r) => r.symbol.startsWith(prefix));

  const stream7 = find(/GPU 0 stream 7/);
  const gemms = rows(stream7, GEMM);
  if (gemms.length !== 6) fail(`${gemms.length} gemm rows on ${stream7}: ${JSON.stringify(profiles[stream7])}`);
  for (const r of gemms) if (Math.abs(micros(r.total) - 300) > 0.01) fail(`a gemm of ${r.total}, not 300 µs`);
  const stream0 = find(/GPU 0 stream 0/);
  const copies = rows(stream0, "[memcpy HtoD]");
  if (copies.length !== 3) fail(`${copies.length} copies on ${stream0}`);
  for (const r of copies) if (Math.abs(micros(r.total) - 8) > 0.01) fail(`a copy of ${r.total}, not 8 µs`);

  const phases = find(/phases: /);
  const phaseSymbols = new Set(profiles[phases].map((r) => r.symbol));
  if (phaseSymbols.size !== 2 || !phaseSymbols.has("Trainer > step") || !phaseSymbols.has("DataLoader > __next__"))
    fail(`phases: ${[...phaseSymbols].join(", ")}`);
  const main = names.find((n) => n !== phases && n !== stream0 && n !== stream7 && /python/.test(n));
  if (!main) fail(`no main thread's profile: ${names.join(" | ")}`);
  for (const symbol of ["<module>", "Trainer > step", "DataLoader > __next__", "spin"])
    if (!profiles[main].some((r) => r.symbol === symbol)) fail(`${main} lacks ${symbol}`);
  // A step is longer than the data loading in it is not: both ~120 and ~60 ms of CPU.
  const step = profiles[main].find((r) => r.symbol === "Trainer > step");
  if (!(micros(step.total) > 0)) fail(`Trainer > step: ${step.total}`);
  if (warnings.length) fail(`speedscope: ${warnings.slice(0, 5).join("; ")}`);

  // What a person sees: the main thread in time order.
  await tab.keyboard.press("1");
  for (let i = 0; i < count && (await title()).replace(/\s*\(\d+\/\d+\)\s*$/, "") !== main; i++) {
    await tab.keyboard.press("p");  // the previous profile ("n" stops at the last)
    await tab.waitForTimeout(200);
  }
  await tab.waitForTimeout(500);
  await tab.screenshot({ path: screenshot });
  console.log(`PASS: speedscope imported ${count} profiles; ${gemms.length} gemms, ${copies.length} copies, phases ok`);
} finally {
  await browser.close();
}
