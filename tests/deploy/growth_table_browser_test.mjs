// A real browser (headless Chromium) uses the flame graph page's table of
// growing stacks, on a record run of tests/workloads/leak.py (2 MiB kept every
// 100 ms under Cache > leak, beside a stack that allocates and frees and one
// that takes 8 MiB once). Usage: node growth_table_browser_test.mjs RECORD_HTML SCREENSHOT.png
// Asserts what a user sees and does: one row per level, for the leak only,
// with its growth, intervals and in use; a click on a row shows that level's
// in use zoomed to the leaking stack.
import { launchChromium } from "./chromium.mjs";

const [recordHtml, screenshot] = process.argv.slice(2);
const fail = (msg) => { console.error(`FAIL: ${msg}`); process.exit(1); };

const browser = await launchChromium();
const errors = [];
try {
  const tab = await browser.newPage({ viewport: { width: 1600, height: 900 } });
  tab.on("pageerror", (e) => errors.push(String(e)));
  await tab.goto(`file://${recordHtml}`);
  if (!(await tab.isVisible("#growth"))) fail("the growth table is not shown");
  const rows = await tab.evaluate(() => [...document.querySelectorAll("#growth tbody tr")].map(
      (tr) => [...tr.cells].map((td) => ({ text: td.textContent, title: td.title }))));
  if (rows.length !== 2) fail(`${rows.length} rows, not one per level: ${JSON.stringify(rows)}`);
  const byProfile = Object.fromEntries(rows.map((r) => [r[1].text, r]));
  for (const profile of ["gpu_memory", "torch_memory"]) {
    const r = byProfile[profile];
    if (!r) fail(`no row for ${profile}: ${JSON.stringify(rows)}`);
    if (r[2].text !== "+50.00 MiB") fail(`${profile} growth ${r[2].text}, not +50.00 MiB`);
    const [grown, intervals] = r[3].text.split("/").map(Number);
    if (!(grown >= 3 && 3 * grown >= 2 * intervals)) fail(`${profile} grew in ${r[3].text}: not most intervals`);
    if (r[4].text !== "0 B → 50.00 MiB") fail(`${profile} in use ${r[4].text}`);
    if (!r[6].text.includes("Cache > leak")) fail(`${profile} stack "${r[6].text}" is not the leak's`);
    if (!r[6].title.replaceAll("<interpreter trampoline> › ", "").startsWith("<module> › Cache > leak › "))
      fail(`${profile} full stack "${r[6].title}"`);
  }
  if (rows.some((r) => /Trainer > step|Model > load/.test(r[6].title))) fail("a stack that does not grow is listed");

  // A click: that level's in use, zoomed to the leak (its frames drawn full
  // width, nothing of the other stacks).
  await tab.click("#growth tbody tr:has-text('torch_memory')");
  const state = await tab.evaluate(() => ({
    profile: document.getElementById("profile").selectedOptions[0].text,
    type: document.getElementById("stype").selectedOptions[0].text,
    names: [...document.querySelectorAll("#graph .node")].map((d) => d.textContent).filter((t) => t),
  }));
  if (state.profile !== "torch_memory") fail(`the click shows ${state.profile}`);
  if (!state.type.startsWith("inuse_space")) fail(`the click shows ${state.type}`);
  if (!state.names.includes("Cache > leak")) fail(`the zoomed graph lacks the leak: ${state.names}`);
  if (state.names.some((n) => n === "Trainer > step" || n === "Model > load"))
    fail(`the zoomed graph shows other stacks: ${state.names}`);
  const width = await tab.evaluate(() => {
    const d = [...document.querySelectorAll("#graph .node")].find((x) => x.textContent === "Cache > leak");
    return d.getBoundingClientRect().width / document.getElementById("graph").clientWidth;
  });
  if (width < 0.99) fail(`the leak is not zoomed to: ${width} of the width`);
  await tab.screenshot({ path: screenshot, fullPage: true });
  if (errors.length) fail(`page errors: ${errors.join("; ")}`);
  console.log("OK: the growth table lists the leak at both levels and zooms to it");
} finally {
  await browser.close();
}
