// A real browser (headless Chromium) reads the flame graph page's "why is the
// GPU idle" section, on a record run of tests/workloads/idle.py starved (20 ms
// of CPU under DataLoader > __next__ per step, then 5 ms of kernels).
// Usage: node utilization_browser_test.mjs RECORD_HTML SUMMARY_JSON SCREENSHOT.png
// Asserts what a user sees and does: the verdict and its reason on top, as
// summary.json has them; a strip with one column per window (up to 600), its
// bars' heights the windows' busy and idle-gap shares; a histogram whose
// bars hold every kernel; and a button that shows the idle-time flame graph,
// with the data loader in it.
import { readFileSync } from "node:fs";
import { launchChromium } from "./chromium.mjs";

const [recordHtml, summaryPath, screenshot] = process.argv.slice(2);
const fail = (msg) => { console.error(`FAIL: ${msg}`); process.exit(1); };
const summary = JSON.parse(readFileSync(summaryPath, "utf8")).utilization;
if (!summary || summary.gpus.length !== 1) fail(`summary.json has ${summary && summary.gpus.length} GPU lanes`);
const lane = summary.gpus[0];

const browser = await launchChromium();
const errors = [];
try {
  const tab = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  tab.on("pageerror", (e) => errors.push(String(e)));
  await tab.goto(`file://${recordHtml}`);
  if (!(await tab.isVisible("#gpus"))) fail("the GPU section is not shown");
  const seen = await tab.evaluate(() => {
    const box = document.querySelector("#gpus .gpu");
    const strip = box.querySelector("svg.strip"), hist = box.querySelector("svg.histogram");
    const H = strip.viewBox.baseVal.height;
    return {
      heading: box.querySelector("h2").textContent,
      verdict: box.querySelector(".verdict").textContent,
      reason: box.querySelector("p").textContent,
      columns: strip.querySelectorAll("rect.busy").length,
      busy: [...strip.querySelectorAll("rect.busy")].map((r) => r.height.baseVal.value / H),
      gap: [...strip.querySelectorAll("rect.gap")].map((r) => r.height.baseVal.value / H),
      stripWidth: strip.getBoundingClientRect().width,
      bars: [...hist.querySelectorAll("rect.bar")].map((r) => r.querySelector("title").textContent),
      ticks: [...hist.querySelectorAll("text.tick")].map((t) => t.textContent),
      driver: [...box.querySelectorAll("svg.driver polyline")].map((l) => ({
        cls: l.getAttribute("class"), points: l.getAttribute("points").split(" ").length })),
    };
  });
  if (!seen.heading.startsWith(`GPU 0 of pid ${lane.pid} (`)) fail(`heading "${seen.heading}"`);
  if (seen.verdict !== "supply") fail(`verdict "${seen.verdict}", summary.json says ${lane.verdict}`);
  if (seen.reason !== lane.reason) fail(`reason "${seen.reason}" is not summary.json's "${lane.reason}"`);
  const windows = lane.windows.busy.length;
  if (seen.columns !== Math.min(windows, 600)) fail(`${seen.columns} columns for ${windows} windows`);
  if (seen.stripWidth < 1000) fail(`the strip is ${seen.stripWidth} px wide, not the page's width`);
  if (windows <= 600)
    for (let i = 0; i < windows; i++)
      if (Math.abs(seen.busy[i] - lane.windows.busy[i]) > 1e-6 || Math.abs(seen.gap[i] - lane.windows.idle_gap[i]) > 1e-6)
        fail(`window ${i}: drawn busy ${seen.busy[i]}, gap ${seen.gap[i]}; summary ${lane.windows.busy[i]}, ` +
             `${lane.windows.idle_gap[i]}`);
  const meanGap = seen.gap.reduce((a, b) => a + b, 0) / seen.gap.length;
  if (meanGap < 0.5) fail(`a starved GPU's strip shows idle gaps ${meanGap} of the time`);
  // Every kernel is in one bar: the bars' counts sum to the run's kernels.
  const drawn = seen.bars.reduce((a, t) => a + Number(t.split(": ")[1].split(" ")[0].replaceAll(",", "")), 0);
  if (drawn !== lane.whole.kernels.count) fail(`the histogram holds ${drawn} kernels, the run ran ${lane.whole.kernels.count}`);
  if (!seen.bars.some((t) => t.startsWith("4") || t.startsWith("5"))) fail(`no bar near 500 µs: ${seen.bars}`);
  if (!seen.ticks.length) fail("the histogram's axis has no labels");

  // The driver's readings of its GPU (the simulated NVML: GPM on), as lines.
  const device = summary.devices.find((d) => d.index === lane.nvml.index);
  if (!device) fail(`the lane's NVML GPU ${JSON.stringify(lane.nvml)} is not among the devices`);
  const util = seen.driver.find((l) => l.cls === "util"), dram = seen.driver.find((l) => l.cls === "dram");
  if (!util || util.points !== device.series.utilization_gpu_pct.filter((v) => v !== null).length)
    fail(`the utilisation line ${JSON.stringify(util)} has not one point per reading (${device.readings})`);
  if (!dram || dram.points !== device.series.gpm_dram_bandwidth_pct.filter((v) => v !== null).length)
    fail(`the DRAM line ${JSON.stringify(dram)} has not one point per GPM reading`);

  // The button: the idle-time flame graph, with the data loader in it.
  await tab.click("#gpus button");
  const shown = await tab.evaluate(() => ({
    profile: document.getElementById("profile").selectedOptions[0].text,
    names: [...document.querySelectorAll("#graph .node")].map((d) => d.textContent).filter((t) => t),
  }));
  if (shown.profile !== "gpu_idle") fail(`the button shows ${shown.profile}`);
  if (!shown.names.some((n) => n.includes("DataLoader > __next__"))) fail(`gpu_idle lacks the loader: ${shown.names}`);
  await tab.screenshot({ path: screenshot, fullPage: true });
  if (errors.length) fail(`page errors: ${errors.join("; ")}`);
  console.log("OK: the page shows the verdict, the strip, the kernel histogram and the idle-time flame graph");
} finally {
  await browser.close();
}
