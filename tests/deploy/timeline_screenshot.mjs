// Not a test: the README's timeline picture, drawn by a viewer we did not
// write. Cuts [FROM, TO) seconds (the trace's own time) out of a gpuflame
// trace, for each PATTERN the first track whose name matches it (spans that
// cross the cut are clipped to it), opens the cut in speedscope (npm) in
// headless Chromium, and stacks each track's top ROWS rows in time order,
// one above the other on the same time axis, into OUT.png.
// Usage: node timeline_screenshot.mjs TRACE.json.gz OUT.png FROM TO ROWS PATTERN...
import { launchChromium } from "./chromium.mjs";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";

const [trace, out, from, to, rows, ...patterns] = process.argv.slice(2);
const here = dirname(fileURLToPath(import.meta.url));
const lo = Number(from) * 1e6, hi = Number(to) * 1e6;  // microseconds, as the trace's ts
const doc = JSON.parse(gunzipSync(readFileSync(trace)));
const names = new Map();  // "pid tid" -> track name
for (const e of doc.traceEvents) if (e.ph === "M" && e.name === "thread_name") names.set(`${e.pid} ${e.tid}`, e.args.name);
const tracks = patterns.map((p) => {
  const key = [...names.keys()].find((k) => new RegExp(p).test(names.get(k)));
  if (!key) throw new Error(`no track like ${p}: ${[...names.values()].join(" | ")}`);
  return key;
});
// Each track's spans (B/E pairs matched, X whole) that meet the cut, as X
// events clipped to it; at one instant, longer spans first and, where the
// clip made them equal, the one begun first (the outer one), so they nest.
const cut = [];
for (const e of doc.traceEvents) if (e.ph === "M" && tracks.includes(`${e.pid} ${e.tid}`)) cut.push(e);
const open = new Map();
const keep = (e, ts, end, seq) => {
  if (end <= lo || ts >= hi) return;
  const a = Math.max(ts, lo), b = Math.min(end, hi);
  cut.push({ ph: "X", name: e.name, cat: e.cat, pid: e.pid, tid: e.tid, ts: a, dur: b - a, seq });
};
let seq = 0;
for (const e of doc.traceEvents) {
  e.seq = seq++;
  const key = `${e.pid} ${e.tid}`;
  if (!tracks.includes(key)) continue;
  if (e.ph === "X") keep(e, e.ts, e.ts + e.dur, e.seq);
  else if (e.ph === "B") (open.get(key) || open.set(key, []).get(key)).push(e);
  else if (e.ph === "E" && open.get(key)?.length) { const b = open.get(key).pop(); keep(b, b.ts, e.ts, b.seq); }
}
// speedscope draws each track from its first event to its last: two
// slivers at the cut's ends give every track the same axis.
for (const key of tracks) {
  const [pid, tid] = key.split(" ").map(Number);
  for (const ts of [lo, hi - 0.001]) cut.push({ ph: "X", name: " ", pid, tid, ts, dur: 0.001, seq: -1 });
}
cut.sort((a, b) => (a.ph === "M" ? -1 : b.ph === "M" ? 1 : a.ts - b.ts || b.dur - a.dur || a.seq - b.seq));
const file = join(mkdtempSync(join(tmpdir(), "gpuflame-shot-")), "cut.json");
writeFileSync(file, JSON.stringify({ traceEvents: cut }));

const width = 1600, toolbar = 20, minimap = 102, row = 18.2;
const browser = await launchChromium();
try {
  const tab = await browser.newPage({ viewport: { width, height: 900 } });
  await tab.goto(`file://${join(here, "node_modules/speedscope/dist/release/index.html")}`);
  await tab.setInputFiles("#file", file);
  const title = async () => (await tab.evaluate(() => document.body.innerText)).split("\n")
    .find((l) => /\(\d+\/\d+\)\s*$/.test(l)) || "";
  for (let i = 0; i < 300 && !(await title()); i++) await tab.waitForTimeout(100);
  const count = Number(/\/(\d+)\)\s*$/.exec(await title())?.[1] || 0);
  if (!count) throw new Error("speedscope did not import the cut");
  await tab.keyboard.press("1");  // time order
  const strips = [];
  for (const key of tracks) {
    const wanted = `(tid ${key.split(" ")[1]})`;
    for (const step of ["n", "p"]) {  // onwards, then back: speedscope's list does not wrap
      for (let i = 0; i < count && !(await title()).includes(wanted); i++) {
        await tab.keyboard.press(step);
        await tab.waitForTimeout(150);
      }
    }
    if (!(await title()).includes(wanted)) throw new Error(`speedscope has no ${names.get(key)}`);
    await tab.mouse.move(width / 2, 400);
    for (let i = 0; i < 20; i++) await tab.mouse.wheel(0, -2000);  // up to the outermost frames
    await tab.waitForTimeout(400);
    const height = Math.round(toolbar + minimap + 20 + row * Number(rows));
    strips.push((await tab.screenshot({ clip: { x: 0, y: 0, width, height } })).toString("base64"));
    console.log(await title());
  }
  // Each strip without its minimap, stacked.
  const html = strips.map((b64) =>
    `<div style="height:${toolbar}px;background:url(data:image/png;base64,${b64}) 0 0"></div>` +
    `<div style="height:${Math.round(20 + row * Number(rows))}px;background:url(data:image/png;base64,${b64}) ` +
    `0 -${toolbar + minimap}px;border-bottom:2px solid #888"></div>`).join("");
  const page = await browser.newPage({ viewport: { width, height: 100 } });
  await page.setContent(`<body style="margin:0;width:${width}px">${html}</body>`);
  await page.screenshot({ path: out, fullPage: true });
  console.log(`-> ${out}`);
} finally {
  await browser.close();
}
