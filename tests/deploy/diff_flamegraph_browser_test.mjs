// A real browser (headless Chromium) uses gpuflame's own diff flame graph,
// the page `gpuflame diff` writes, and the plain flame graph of the same page
// code. Usage: node diff_flamegraph_browser_test.mjs DIFF_HTML RECORD_HTML SCREENSHOT.png PARTIAL_HTML
//   DIFF_HTML    diff_flamegraph.html of two record runs of tests/workloads/diff_runs.py
//   RECORD_HTML  flamegraph.html of the run named NEW
//   PARTIAL_HTML the diff of an older gpuflame's gpu_memory (no peak_*, unused_*) against NEW's
// Asserts what a user sees and does: frames red where they grew and blue
// where they shrank, deeper for larger changes, a frame only in BASE still
// drawn (hatched), widths base + new or as chosen, the tooltip's base, new and
// delta with units, regex search, click to zoom and back, the table by change.
import { launchChromium } from "./chromium.mjs";

const [diffHtml, recordHtml, screenshot, partialHtml] = process.argv.slice(2);
const fail = (msg) => { console.error(`FAIL: ${msg}`); process.exit(1); };
const MiB = "MiB";

const browser = await launchChromium();
const errors = [];
try {
  const tab = await browser.newPage({ viewport: { width: 1600, height: 900 } });
  tab.on("pageerror", (e) => errors.push(String(e)));
  await tab.goto(`file://${diffHtml}`);
  // The same sample types on both sides: nothing was left out, no note.
  const notes = () => tab.evaluate(() => [...document.querySelectorAll("#notes p")].map((p) => p.textContent));
  if ((await notes()).length) fail(`notes on a diff of the same types: ${JSON.stringify(await notes())}`);
  // It opens on a profile with stacks (gpu_kernel, first by name, has none here).
  const first = await tab.evaluate(() => document.getElementById("profile").selectedOptions[0].text);
  if (first !== "gpu_memory") fail(`the page opens on ${first}, not gpu_memory`);
  await tab.selectOption("#profile", { label: "torch_memory" });

  // Every drawn frame: name (when wide enough to carry it), classes, colour
  // as hue and lightness, box.
  const frames = () => tab.evaluate(() => [...document.querySelectorAll("#graph .node")].map((d) => {
    const [r, g, b] = getComputedStyle(d).backgroundColor.match(/\d+/g).map(Number);
    const max = Math.max(r, g, b), min = Math.min(r, g, b);
    const box = d.getBoundingClientRect();
    return { name: d.textContent, classes: [...d.classList], r, g, b, lightness: (max + min) / 2 / 255,
             x: box.x + box.width / 2, y: box.y + box.height / 2, width: box.width };
  }));
  const only = (list, name) => {
    const found = list.filter((f) => f.name === name);
    if (found.length !== 1) fail(`${found.length} frames named "${name}" (of ${list.map((f) => f.name).join(", ")})`);
    return found[0];
  };
  const red = (f) => f.r > f.b + 40, blue = (f) => f.b > f.r + 40, grey = (f) => f.r === f.g && f.g === f.b;

  let all = await frames();
  const kv = only(all, "KVCache > __init__"), prefix = only(all, "prefix_cache");
  const legacy = only(all, "legacy_buffers"), act = only(all, "activations"), weights = only(all, "Weights > __init__");
  // Colour by change: +32 and +20 MiB red, -12 and -8 MiB blue, the same grey.
  if (!red(kv) || !red(prefix)) fail(`growth is not red: ${JSON.stringify([kv, prefix])}`);
  if (!blue(legacy) || !blue(act)) fail(`shrinkage is not blue: ${JSON.stringify([legacy, act])}`);
  if (!grey(weights)) fail(`an unchanged frame is not grey: ${JSON.stringify(weights)}`);
  // In proportion: the larger change is the deeper colour.
  if (!(kv.lightness < prefix.lightness)) fail(`+32 MiB is not deeper than +20 MiB: ${kv.lightness} ${prefix.lightness}`);
  if (!(legacy.lightness < act.lightness)) fail(`-12 MiB is not deeper than -8 MiB: ${legacy.lightness} ${act.lightness}`);
  // What went away is drawn, hatched; what is new is marked too.
  if (!legacy.classes.includes("gone") || kv.classes.includes("gone")) fail(`only-in-BASE marking: ${JSON.stringify([legacy, kv])}`);
  if (!prefix.classes.includes("added")) fail(`only-in-NEW marking: ${JSON.stringify(prefix)}`);
  const hatch = await tab.evaluate(() => getComputedStyle(document.querySelector("#graph .node.gone")).backgroundImage);
  if (!hatch.includes("repeating-linear-gradient")) fail(`a frame only in BASE is not hatched: ${hatch}`);
  // Width base + new: KVCache 64 + 96 against prefix 0 + 20 and legacy 12 + 0.
  const near = (a, b) => Math.abs(a - b) / b < 0.03;
  if (!near(kv.width / prefix.width, 160 / 20)) fail(`KVCache/prefix widths ${kv.width}/${prefix.width}, not 160/20`);
  if (!near(kv.width / legacy.width, 160 / 12)) fail(`KVCache/legacy widths ${kv.width}/${legacy.width}, not 160/12`);

  const summary = () => tab.evaluate(() => document.getElementById("summary").textContent);
  const want = `base 94.00 ${MiB} → new 126.00 ${MiB} (+32.00 ${MiB})`;
  if (!(await summary()).startsWith(want)) fail(`summary "${await summary()}", not "${want}"`);

  // The tooltip: base, new and delta with units.
  const tip = async (f) => {
    await tab.mouse.move(f.x, f.y);
    return tab.evaluate(() => document.getElementById("tip").innerText);
  };
  const expectTip = async (f, parts) => {
    const text = await tip(f);
    for (const p of parts) if (!text.includes(p)) fail(`tooltip of ${f.name} lacks "${p}": ${JSON.stringify(text)}`);
  };
  await expectTip(legacy, ["legacy_buffers", "only in BASE", `Base: 12.00 ${MiB}`, "New: 0 B", `Delta: -12.00 ${MiB} (-100.0%)`]);
  await expectTip(kv, [`Base: 64.00 ${MiB}`, `New: 96.00 ${MiB}`, `Delta: +32.00 ${MiB} (+50.0%)`, "diff_runs.py"]);
  await expectTip(prefix, ["only in NEW", "Base: 0 B", `New: 20.00 ${MiB}`, `Delta: +20.00 ${MiB}`]);
  await tab.mouse.move(1, 1);

  // The table lists functions by how much they changed.
  const rows = await tab.evaluate(() => [...document.querySelectorAll("#table tbody tr")].map((r) => r.innerText.replace(/\s+/g, " ").trim()));
  const expectRow = (row) => { if (!rows.includes(row)) fail(`no table row "${row}" among ${JSON.stringify(rows.slice(0, 8))}`); };
  expectRow(`KVCache > __init__ 64.00 ${MiB} 96.00 ${MiB} +32.00 ${MiB}`);
  expectRow(`legacy_buffers 12.00 ${MiB} 0 B -12.00 ${MiB}`);
  if (rows.some((r) => r.startsWith("Weights > __init__ "))) fail("an unchanged function is in the table of changes");

  // Search: a regex, the frames it matches outlined, the others dimmed, the
  // matched totals of both sides said.
  await tab.fill("#search", "legacy_.*");
  all = await frames();
  if (!only(all, "legacy_buffers").classes.includes("match")) fail("search does not mark the frame only in BASE");
  if (!only(all, "KVCache > __init__").classes.includes("dim")) fail("search does not dim the others");
  const matched = `matched: base 12.00 ${MiB} → new 0 B`;
  if (!(await summary()).includes(matched)) fail(`summary "${await summary()}" lacks "${matched}"`);
  await tab.fill("#search", "");

  // Zoom: a click on KVCache draws it full width, legacy_buffers (beside
  // it) goes; Reset zoom brings it back.
  const graphWidth = await tab.evaluate(() => document.getElementById("graph").clientWidth);
  await tab.mouse.click(kv.x, kv.y);
  all = await frames();
  const zoomed = only(all, "KVCache > __init__");
  if (!near(zoomed.width, graphWidth)) fail(`zoomed KVCache is ${zoomed.width} px of ${graphWidth}`);
  if (all.some((f) => f.name === "legacy_buffers")) fail("zoom into KVCache still draws legacy_buffers");
  await tab.click("#reset");
  all = await frames();
  only(all, "legacy_buffers");

  // Width by NEW alone (Brendan Gregg's choice): what went away has none.
  await tab.selectOption("#sizeby", "new");
  all = await frames();
  if (all.some((f) => f.name === "legacy_buffers")) fail("width by NEW still draws a frame only in BASE");
  const kvNew = only(all, "KVCache > __init__"), prefixNew = only(all, "prefix_cache");
  if (!near(kvNew.width / prefixNew.width, 96 / 20)) fail(`by NEW, KVCache/prefix ${kvNew.width}/${prefixNew.width}, not 96/20`);
  await tab.selectOption("#sizeby", "both");
  await tab.screenshot({ path: screenshot, fullPage: false });

  // The plain flame graph, the same page code without a diff: drawn by kind,
  // no diff controls, search and zoom as before.
  await tab.goto(`file://${recordHtml}`);
  await tab.selectOption("#profile", { label: "torch_memory" });
  if (await tab.isVisible("#sizeby")) fail("the plain flame graph shows the diff's width selector");
  if ((await summary()) !== `total 126.00 ${MiB}`) fail(`plain summary "${await summary()}"`);
  all = await frames();
  const plainKv = only(all, "KVCache > __init__");
  if (plainKv.classes.includes("gone") || plainKv.classes.includes("added")) fail("diff marks on a plain flame graph");
  await tab.fill("#search", "KVCache");
  if (!(await summary()).includes(`matched 96.00 ${MiB} (76.2%)`)) fail(`plain search: "${await summary()}"`);
  await tab.fill("#search", "");
  await tab.mouse.click(plainKv.x, plainKv.y);
  if (!near(only(await frames(), "KVCache > __init__").width, graphWidth)) fail("plain zoom does not fill the width");
  await expectTip(only(await frames(), "KVCache > __init__"), [`Total: 96.00 ${MiB}`]);

  // Sides of different sample types: the diff of the types both have, what
  // was left out said above it, and its value selector offers only those.
  await tab.goto(`file://${partialHtml}`);
  const partialNotes = await notes();
  if (partialNotes.length !== 1 || !partialNotes[0].startsWith("gpu_memory: diffed the 4 sample types both have; only NEW has peak_objects/count"))
    fail(`partial diff notes: ${JSON.stringify(partialNotes)}`);
  if (!(await tab.isVisible("#notes p"))) fail("the partial diff's note is not visible");
  const types = await tab.evaluate(() => [...document.getElementById("stype").options].map((o) => o.text));
  if (types.some((t) => t.startsWith("peak_") || t.startsWith("unused_")) || types.length !== 4)
    fail(`partial diff offers ${JSON.stringify(types)}`);

  if (errors.length) fail(`page errors: ${errors.join("; ")}`);
  console.log(`ok: diff colours, widths, tooltips, table, search and zoom; plain page unchanged; partial diff's note; screenshot ${screenshot}`);
} finally {
  await browser.close();
}
