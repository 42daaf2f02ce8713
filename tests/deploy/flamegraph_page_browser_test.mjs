// A real browser (headless Chromium) uses gpuflame's own flame graph page
// (exporters/files/flamegraph.html) the way its users do.
// Usage: node flamegraph_page_browser_test.mjs RECORD_HTML EMPTY_HTML VIEWER_PY SCREENSHOT_PREFIX
//   RECORD_HTML  flamegraph.html of a record run of tests/workloads/viewer.py
//   EMPTY_HTML   flamegraph.html of a record run of a command that allocates nothing
// Asserts: the tooltip inside narrow and wide windows; a frame's bytes by
// line; the functions table by function identity, sorted, filtered, paged
// and clicked; one tree per process, or merged; times in units by magnitude;
// the inverted and sandwich views; keys; the view in the URL; export as
// folded text, SVG and PNG; dark mode; an empty profile saying why.
import { readFileSync } from "node:fs";
import { launchChromium } from "./chromium.mjs";

const [recordHtml, emptyHtml, viewerPy, shots] = process.argv.slice(2);
const fail = (msg) => { console.error(`FAIL: ${msg}`); process.exit(1); };
const MiB = 1 << 20;
// The source lines of Loader > load's two allocations.
const source = readFileSync(viewerPy, "utf8").split("\n");
const lineOf = (text) => source.findIndex((l) => l.includes(text)) + 1;
const smallLine = lineOf("self.small = "), largeLine = lineOf("self.large = ");
// "12.50 MiB", "3.20 ms", "0 B" as numbers (bytes, nanoseconds).
const UNITS = { B: 1, KiB: 1024, MiB: MiB, GiB: 1024 * MiB, ns: 1, "µs": 1e3, ms: 1e6, s: 1e9 };
const parseValue = (t) => { const [v, u] = t.trim().split(/\s+/); return Number(v.replace(/,/g, "")) * (UNITS[u] || 1); };

const browser = await launchChromium();
const errors = [];
try {
  const context = await browser.newContext({ viewport: { width: 1600, height: 900 }, acceptDownloads: true, colorScheme: "light" });
  const tab = await context.newPage();
  tab.on("pageerror", (e) => errors.push(String(e)));
  await tab.goto(`file://${recordHtml}`);

  // Every drawn frame of a graph: name, depth, box, classes.
  const frames = (graph = "#graph") => tab.evaluate((sel) => [...document.querySelectorAll(`${sel} .node`)].map((d) => {
    const b = d.getBoundingClientRect();
    return { name: d.textContent, depth: Math.round(parseFloat(d.style.top) / 20), x: b.x, y: b.y, width: b.width,
             cx: b.x + b.width / 2, cy: b.y + b.height / 2, right: b.right, classes: [...d.classList] };
  }), graph);
  const only = (list, name) => {
    const found = list.filter((f) => f.name === name);
    if (found.length !== 1) fail(`${found.length} frames named "${name}" (of ${list.map((f) => f.name).join(", ")})`);
    return found[0];
  };
  const text = (sel) => tab.evaluate((s) => document.querySelector(s).innerText, sel);
  const summary = () => text("#summary");
  const hashOf = async (k) => tab.evaluate((key) => new URLSearchParams(location.hash.slice(1)).get(key), k);
  const tableRows = () => tab.evaluate(() => [...document.querySelectorAll("#table tbody tr")].map((r) =>
      ({ name: r.cells[0].textContent, file: r.cells[1].textContent, self: r.cells[2].textContent, total: r.cells[3].textContent })));
  const choose = async (profile, value) => {
    await tab.selectOption("#profile", { label: profile });
    if (value) await tab.selectOption("#stype", { label: value });
  };
  const graphWidth = await tab.evaluate(() => document.getElementById("graph").clientWidth);
  const near = (a, b) => Math.abs(a - b) <= Math.max(2, 0.01 * b);

  // Times in units by magnitude (bytes already were).
  const units = await tab.evaluate(() => [999, 1500, 2.5e6, 3.2e9].map((v) => fmt(v, "nanoseconds")));
  if (units.join("|") !== "999 ns|1.50 µs|2.50 ms|3.20 s") fail(`time units: ${units}`);
  await choose("process_cpu");
  const cpuTotal = await tab.evaluate(() => DATA.profiles.find((p) => p.name === "process_cpu").types[0].root[1]);
  const wantCpu = cpuTotal >= 1e9 ? `${(cpuTotal / 1e9).toFixed(2)} s` : `${(cpuTotal / 1e6).toFixed(2)} ms`;
  if ((await summary()) !== `total ${wantCpu}`) fail(`process_cpu summary "${await summary()}", not "total ${wantCpu}"`);

  // One tree per process: the workload and its helper under the root.
  let all = await frames();
  const procs = all.filter((f) => f.depth === 1);
  if (procs.length !== 2 || !procs.every((f) => /^python[\d.]* \(pid \d+\)$/.test(f.name)))
    fail(`process_cpu's first level is not its two processes: ${JSON.stringify(procs.map((f) => f.name))}`);
  if (!(await tab.isVisible("#merge"))) fail("no merge-processes control on a profile of two processes");
  await tab.check("#merge");
  all = await frames();
  if (all.some((f) => / \(pid \d+\)$/.test(f.name))) fail("merged processes still drawn");
  if ((await summary()) !== `total ${wantCpu}`) fail(`merging changed the total: ${await summary()}`);
  if ((await hashOf("merge")) !== "1") fail("the URL does not say processes are merged");
  await tab.uncheck("#merge");

  // Functions by identity: this file's main and the helper's are two rows.
  await tab.fill("#tfilter", "^main$");
  let rows = await tableRows();
  // (CPython's own site.py has a main too, at startup: a third row.)
  const mains = rows.map((r) => r.file);
  if (!mains.includes("viewer.py") || !mains.includes("viewer_helper.py") || new Set(mains).size !== mains.length)
    fail(`the mains: ${JSON.stringify(rows)}`);
  await tab.fill("#tfilter", "");

  // Sorting: by total (down, then up), by name.
  const sortedBy = (list, key, dir) => list.every((r, i) => i === 0 || dir * (key === "name" ? list[i - 1].name.localeCompare(r.name)
      : parseValue(list[i - 1][key]) - parseValue(r[key])) <= 0);
  await tab.click("#table th[data-key=total]");
  rows = await tableRows();
  if (!sortedBy(rows, "total", -1)) fail(`not sorted by total, largest first: ${JSON.stringify(rows.slice(0, 6))}`);
  if ((await tab.getAttribute("#table th[data-key=total]", "aria-sort")) !== "descending") fail("total's header does not say how it sorts");
  await tab.click("#table th[data-key=total]");
  if (!sortedBy(await tableRows(), "total", 1)) fail("a second click does not sort by total, smallest first");
  await tab.click("#table th[data-key=name]");
  if (!sortedBy(await tableRows(), "name", 1)) fail("not sorted by name");
  await tab.click("#table th[data-key=self]");

  // All functions, a page at a time, and a filter.
  await choose("torch_memory", "alloc_space (bytes)");
  rows = await tableRows();
  const count = await text("#tcount");
  const [shown, of] = count.match(/\d+/g).map(Number);
  if (rows.length !== 100 || shown !== 100 || of < 120) fail(`first page: ${rows.length} rows, "${count}"`);
  if (!(await tab.isVisible("#more"))) fail("no way to the rows beyond the first page");
  await tab.click("#more");
  if ((await tableRows()).length !== Math.min(of, 200)) fail(`after "more": ${(await tableRows()).length} rows of ${of}`);
  await tab.fill("#tfilter", "layer_0[0-4]");
  rows = await tableRows();
  if (rows.length !== 50 || !rows.every((r) => /^layer_0[0-4]\d$/.test(r.name) && r.total === "64.00 KiB"))
    fail(`filtered layer rows: ${rows.length} ${JSON.stringify(rows.slice(0, 3))}`);

  // A row's click highlights its function and, called from one place, zooms to it.
  await tab.fill("#tfilter", "^Loader > load$");
  await tab.click("#table tbody tr:has-text('Loader > load') td:first-child");
  all = await frames();
  const load = only(all, "Loader > load");
  if (!load.classes.includes("match") || !all.some((f) => f.classes.includes("dim"))) fail("the clicked function is not highlighted");
  if (!near(load.width, graphWidth)) fail(`the click does not zoom to Loader > load: ${load.width} of ${graphWidth}`);
  if (!(await summary()).includes(`Loader > load: 32.00 MiB`)) fail(`summary "${await summary()}"`);
  if ((await hashOf("fn")) === null || !(await hashOf("zoom"))) fail(`the URL lacks the function or zoom: ${await tab.evaluate(() => location.hash)}`);
  const zoomedUrl = await tab.evaluate(() => location.href);

  // Its tooltip splits its bytes by line.
  await tab.mouse.move(load.cx, load.cy);
  const tip = await text("#tip");
  for (const want of [`viewer.py:${largeLine}\t24.00 MiB (`, `viewer.py:${smallLine}\t8.00 MiB (`, "Total: 32.00 MiB"])
    if (!tip.includes(want)) fail(`Loader > load's tooltip lacks "${want}": ${JSON.stringify(tip)}`);
  if (tip.indexOf(`:${largeLine}`) > tip.indexOf(`:${smallLine}`)) fail("the lines are not largest first");

  // Export of this view: its stacks as folded text, under the frames above it.
  const saved = async (kind) => {
    const [dl] = await Promise.all([tab.waitForEvent("download"), tab.selectOption("#export", kind)]);
    return { name: dl.suggestedFilename(), bytes: readFileSync(await dl.path()) };
  };
  const folded = await saved("folded");
  const stacks = folded.bytes.toString().trim().split("\n");
  const sum = stacks.reduce((s, l) => s + Number(l.split(" ").pop()), 0);
  if (sum !== 32 * MiB || !stacks.every((l) => l.includes("main;Loader > load;")))
    fail(`folded export (${folded.name}): ${sum} bytes in ${JSON.stringify(stacks)}`);
  if (!folded.name.endsWith(".folded") || !folded.name.startsWith("torch_memory.alloc_space")) fail(`folded file name ${folded.name}`);
  const svg = (await saved("svg")).bytes.toString();
  if (!svg.startsWith("<svg") || !svg.includes(">Loader &gt; load<")) fail(`SVG export: ${svg.slice(0, 200)}`);
  const png = (await saved("png")).bytes;
  if (png.length < 1000 || png.subarray(1, 4).toString() !== "PNG") fail(`PNG export: ${png.length} bytes`);

  // The view in the URL: a new tab on the same address shows the same.
  const again = await context.newPage();
  again.on("pageerror", (e) => errors.push(String(e)));
  await again.goto(zoomedUrl);
  const restored = await again.evaluate(() => ({
    profile: document.getElementById("profile").selectedOptions[0].text,
    value: document.getElementById("stype").selectedOptions[0].text,
    load: [...document.querySelectorAll("#graph .node")].find((d) => d.textContent === "Loader > load")?.getBoundingClientRect().width,
    selected: document.querySelector("#table tbody tr.selected")?.cells[0].textContent,
  }));
  if (restored.profile !== "torch_memory" || !restored.value.startsWith("alloc_space") || !near(restored.load, graphWidth) ||
      restored.selected !== "Loader > load") fail(`the URL did not restore the view: ${JSON.stringify(restored)}`);
  await again.close();

  // Keys: Esc zooms out; arrows move between frames, Enter zooms, / searches.
  await tab.fill("#tfilter", "");
  await tab.click("#reset");
  await tab.evaluate(() => document.activeElement.blur());
  await tab.keyboard.press("Escape");  // clears the chosen function
  if ((await hashOf("fn")) !== null) fail("Escape does not clear the chosen function");
  const focused = () => tab.evaluate(() => {
    const d = document.querySelector("#graph .node.focus");
    return d && { name: d.textContent, depth: Math.round(parseFloat(d.style.top) / 20), width: d.getBoundingClientRect().width };
  });
  await tab.keyboard.press("ArrowDown");
  if ((await focused())?.name !== "total") fail(`the first arrow does not focus the root: ${JSON.stringify(await focused())}`);
  await tab.keyboard.press("ArrowDown");
  const child = await focused();
  if (child?.depth !== 1) fail(`ArrowDown does not move to a child: ${JSON.stringify(child)}`);
  if (!(await tab.isVisible("#tip"))) fail("a focused frame shows no tooltip");
  await tab.keyboard.press("ArrowUp");
  if ((await focused())?.depth !== 0) fail("ArrowUp does not move to the parent");
  await tab.keyboard.press("ArrowDown");
  await tab.keyboard.press("Enter");
  const zoomedTo = await focused();
  if (!(await hashOf("zoom")) || zoomedTo?.name !== child.name || !near(zoomedTo.width, graphWidth))
    fail(`Enter does not zoom to ${child.name}: ${JSON.stringify(zoomedTo)}`);
  await tab.keyboard.press("Escape");
  if ((await hashOf("zoom")) !== null) fail("Escape does not zoom out");
  await tab.keyboard.press("/");
  if (!(await tab.evaluate(() => document.activeElement.id === "search"))) fail("/ does not go to the search box");
  await tab.keyboard.type("layer_00");
  if (!/matched 640.00 KiB/.test(await summary())) fail(`search summary "${await summary()}"`);
  if ((await hashOf("search")) !== "layer_00") fail("the URL lacks the search");
  await tab.keyboard.press("Escape");
  if (await tab.evaluate(() => document.activeElement.id === "search")) fail("Escape does not leave the search box");
  await tab.fill("#search", "");

  // The inverted view: what allocated at the top (each function's self), who
  // called it below.
  await tab.selectOption("#view", "inverted");
  all = await frames();
  const selfRows = (await tableRows()).filter((r) => parseValue(r.self) > 0);
  const top1 = all.filter((f) => f.depth === 1).sort((a, b) => b.width - a.width)[0];
  if (top1.name !== selfRows[0].name) fail(`inverted: widest leaf ${top1.name}, the table's largest self is ${selfRows[0].name}`);
  if (!all.some((f) => f.depth === 2 && f.x >= top1.x - 1 && f.right <= top1.right + 1)) fail("inverted: the leaf has no callers drawn");
  if ((await hashOf("view")) !== "inverted") fail("the URL lacks the view");

  // The sandwich of Loader > load: main called it; it called the allocator.
  await tab.fill("#tfilter", "^Loader > load$");
  await tab.click("#table tbody tr:has-text('Loader > load') button.sandwich");
  if ((await tab.inputValue("#view")) !== "sandwich") fail("the sandwich button does not show the sandwich");
  const callers = await frames("#graph"), callees = await frames("#graph2");
  if (only(callers, "Loader > load").depth !== 0 || only(callers, "main").depth !== 1) fail(`callers: ${JSON.stringify(callers.map((f) => [f.name, f.depth]))}`);
  if (only(callees, "Loader > load").depth !== 0 || !callees.some((f) => f.depth === 1)) fail(`callees: ${JSON.stringify(callees.map((f) => [f.name, f.depth]))}`);
  if (!(await text("#caption1")).startsWith("Callers of Loader > load")) fail(`caption "${await text("#caption1")}"`);
  await tab.fill("#tfilter", "");
  await tab.selectOption("#view", "flame");

  // The tooltip stays in the window, narrow or wide, at its right and bottom edges.
  for (const [w, h] of [[480, 700], [1600, 900]]) {
    await tab.setViewportSize({ width: w, height: h });
    await tab.waitForTimeout(100);  // the resize redraws on the next frame
    all = await frames();
    const seen = all.filter((f) => f.depth >= 1 && f.cy < h - 4);
    const edge = seen.sort((a, b) => b.right - a.right || b.depth - a.depth)[0];
    const low = seen.sort((a, b) => b.cy - a.cy)[0];
    for (const [x, y] of [[edge.right - 2, edge.cy], [low.right - 2, low.cy]]) {
      await tab.mouse.move(x, y);
      if (!(await tab.isVisible("#tip"))) continue;  // nothing under the point
      const r = await tab.evaluate(() => document.getElementById("tip").getBoundingClientRect().toJSON());
      if (r.left < 0 || r.top < 0 || r.right > w || r.bottom > h) fail(`at ${w}x${h}, the tooltip at (${x}, ${y}) is outside: ${JSON.stringify(r)}`);
    }
  }
  await tab.mouse.move(1, 1);
  await tab.screenshot({ path: `${shots}-light.png` });

  // Dark mode: as the system says, or as chosen.
  const background = () => tab.evaluate(() => getComputedStyle(document.body).backgroundColor.match(/\d+/g).map(Number));
  const dark = (c) => c[0] + c[1] + c[2] < 150;
  if (dark(await background())) fail("a light system gets a dark page");
  await tab.emulateMedia({ colorScheme: "dark" });
  if (!dark(await background())) fail("a dark system gets a light page");
  await tab.screenshot({ path: `${shots}-dark.png` });
  await tab.click("#theme");  // auto -> light
  if (dark(await background()) || (await text("#theme")) !== "Theme: light") fail("the theme button does not choose light");
  await tab.click("#theme");  // light -> dark
  await tab.emulateMedia({ colorScheme: "light" });
  if (!dark(await background())) fail("the theme button does not choose dark");
  await tab.click("#theme");  // back to auto

  // An empty profile says why.
  await tab.goto(`file://${emptyHtml}`);
  await choose("gpu_memory");
  const empty = await text("#empty");
  if ((await summary()) !== "total 0 B" || !(await tab.isVisible("#empty")) ||
      !empty.includes("no samples") || !empty.includes("no profiled process allocated device memory"))
    fail(`the empty profile does not say why: "${await summary()}" "${empty}"`);

  if (errors.length) fail(`page errors: ${errors.join("; ")}`);
  console.log(`ok: tooltip placement and lines, table, processes, units, views, keys, URL, export, theme, empty; screenshots ${shots}-*.png`);
} finally {
  await browser.close();
}
