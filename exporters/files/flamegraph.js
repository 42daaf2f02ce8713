"use strict";
// The flame graph page (flamegraph.html): drawing, tooltip, search, zoom,
// views, the functions table, keys, the URL's view state, export and theme.
// The trees come from flamegraph_model.js.
const DATA = JSON.parse(document.getElementById("gpuflame-data").textContent);
const KIND_COLORS = {
  python: (h) => `hsl(${200 + h % 30}, 65%, ${68 + h % 12}%)`,
  trampoline: () => "hsl(0, 0%, 82%)",
  native: (h) => `hsl(${20 + h % 25}, 80%, ${62 + h % 12}%)`,
  api: () => "hsl(350, 75%, 62%)",
  marker: () => "hsl(50, 10%, 75%)",
  process: (h) => `hsl(${265 + h % 20}, 35%, ${76 + h % 8}%)`,
};
const el = (id) => document.getElementById(id);
// A diff (gpuflame diff): nodes carry BASE's total as a fourth element.
const DIFF = DATA.diff || null;
const ROW_H = 20, PAGE_ROWS = 100;
// Everything a view is, and what the URL's hash says (writeHash).
const current = { profile: 0, type: 0, view: "flame", merge: false, zoom: [], fn: null, sizeBy: "both",
                  sort: { key: "self", dir: -1 }, rows: PAGE_ROWS };

function hash(s) { let h = 0; for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0; return Math.abs(h); }
const colors = [];
function colorOf(f) {
  if (colors[f] === undefined) {
    const [name, kind] = DATA.frames[f];
    colors[f] = (KIND_COLORS[kind] || KIND_COLORS.native)(hash(name));
  }
  return colors[f];
}
// The width of a frame. A diff is drawn by base + new by default, as Grafana's
// and Pyroscope's diff views draw it: frames only in BASE keep their width.
function size(n) {
  if (!DIFF) return n[1];
  return current.sizeBy === "new" ? n[1] : current.sizeBy === "base" ? baseOf(n) : n[1] + baseOf(n);
}

function profiles() { return DATA.profiles; }
function curProfile() { return profiles()[current.profile]; }
function curType() { return curProfile().types[current.type]; }

// The trees of the current profile and value, built once each.
const trees = new Map();
function cached(key, make) {
  const k = `${current.profile}/${current.type}/${current.merge}/${key}`;
  if (!trees.has(k)) trees.set(k, make());
  return trees.get(k);
}
function flameTree() {
  const root = curType().root;
  return current.merge && byProcess(root) ? cached("flame", () => mergeProcesses(root)) : root;
}
function viewTree() {
  if (current.view === "inverted") return cached("inverted", () => invert(flameTree()));
  return flameTree();
}
function totals() { return cached("totals", () => functionTotals(flameTree())); }

function fillSelectors() {
  const ps = el("profile"); ps.innerHTML = "";
  profiles().forEach((p, i) => ps.add(new Option(p.name, i)));
  ps.value = current.profile;
  fillTypes();
}
function fillTypes(type) {
  const ts = el("stype"); ts.innerHTML = "";
  const p = curProfile();
  p.types.forEach((t, i) => ts.add(new Option(`${t.type} (${t.unit})`, i)));
  current.type = Math.max(0, p.types.findIndex((t) => t.type === (type || p.default_type)));
  ts.value = current.type;
}

// ---- Drawing ----------------------------------------------------------
// Each graph keeps what it drew: [{n, depth, x, w, parent, kids, ancestor}],
// frame i being the graph's element child i.
// What is typed in a search box as a regex (as plain text where it is not
// one); null for nothing.
function regexOf(input) {
  const q = input.value.trim(); if (!q) return null;
  try { return new RegExp(q, "i"); } catch (e) { return new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "i"); }
}
function searchRegex() { return regexOf(el("search")); }
// Whether a function is highlighted: the search matches its name, or it is
// the function chosen in the table. null: nothing is highlighted.
function matcher() {
  // A sandwich is all the chosen function's: outlining it there says nothing.
  const re = searchRegex(), fn = current.view === "sandwich" ? null : current.fn;
  if (!re && fn === null) return null;
  const memo = new Map();
  return (f) => {
    let m = memo.get(f);
    if (m === undefined) { m = f === fn || (!!re && re.test(DATA.frames[f][0])); memo.set(f, m); }
    return m;
  };
}
function drawGraph(g, root, zoomIds, unit, match) {
  g.innerHTML = "";
  const width = g.clientWidth || 1000;
  const drawn = [];
  // Ancestors of the zoomed node are drawn full width above it.
  const path = resolvePath(root, zoomIds);
  let parent = -1;
  path.forEach((n, d) => {
    const i = drawn.length;
    drawn.push({ n, depth: d, x: 0, w: width, parent, kids: [], ancestor: d < path.length - 1 });
    if (parent >= 0) drawn[parent].kids.push(i);
    parent = i;
  });
  const top = drawn.length - 1;
  drawn[top].ancestor = false;
  let maxDepth = top;
  (function walk(i) {
    const e = drawn[i]; const n = e.n; const total = size(n) || 1;
    let cx = e.x;
    for (const c of n[2]) {
      const cw = e.w * size(c) / total;
      if (cw >= 0.5) {
        const j = drawn.length;
        drawn.push({ n: c, depth: e.depth + 1, x: cx, w: cw, parent: i, kids: [], ancestor: false });
        e.kids.push(j);
        maxDepth = Math.max(maxDepth, e.depth + 1);
        walk(j);
      }
      cx += cw;
    }
  })(top);
  // One string parsed by the browser: a third faster than a createElement
  // and style calls per frame. A frame's element is g.children[its index].
  const html = [];
  for (let i = 0; i < drawn.length; i++) html.push(box(drawn[i], i, match));
  g.style.height = ((maxDepth + 1) * ROW_H + 4) + "px";
  g.innerHTML = html.join("");
  g.drawn = drawn; g.root = root; g.unit = unit; g.top = top;
  return drawn;
}
function box(e, i, match) {
  const n = e.n; const name = DATA.frames[n[0]][0];
  let cls = "node", color;
  if (DIFF) {
    // background-color, not background: that would drop the hatching
    color = `background-color:${diffColor(n)}`;
    if (!n[1] && baseOf(n)) cls += " gone";
    if (n[1] && !baseOf(n)) cls += " added";
  } else {
    color = `background:${colorOf(n[0])}`;
  }
  if (match) cls += match(n[0]) ? " match" : " dim";
  if (e.ancestor) cls += " ancestor";
  return `<div class="${cls}" data-i="${i}" style="left:${e.x}px;width:${Math.max(e.w, 1)}px;top:${e.depth * ROW_H}px;${color}">` +
      `${e.w > 30 ? escapeHtml(name) : ""}</div>`;
}

function render() {
  const t = curType(); const unit = t.unit; const root = viewTree();
  const match = matcher();
  focusIndex = -1; hideTip();
  el("merge-label").hidden = !byProcess(t.root);
  el("merge").checked = current.merge;
  el("view").value = current.view;
  el("reset").disabled = current.view === "sandwich";
  const g1 = el("graph"), g2 = el("graph2");
  const sandwiched = current.view === "sandwich";
  g2.hidden = el("caption1").hidden = el("caption2").hidden = !sandwiched;
  if (sandwiched) {
    if (current.fn === null) current.fn = topFunction();
    if (current.fn === null) { g1.innerHTML = ""; g2.innerHTML = ""; g1.drawn = g2.drawn = []; }
    else {
      const s = cached(`sandwich/${current.fn}`, () => sandwich(flameTree(), current.fn));
      const name = DATA.frames[current.fn][0];
      el("caption1").textContent = `Callers of ${name} (who called it: each row called the row above)`;
      el("caption2").textContent = `Callees of ${name} (what it called)`;
      drawGraph(g1, s.callers, [], unit, match);
      drawGraph(g2, s.callees, [], unit, match);
    }
  } else {
    drawGraph(g1, root, current.zoom, unit, match);
    g2.innerHTML = ""; g2.drawn = [];
  }
  renderEmpty(t);
  const re = searchRegex();
  // Matched: in the zoomed frame of the flame graph, else in the whole profile
  // (an inverted tree would be built in full to count it).
  const focus = current.view === "flame" ? resolvePath(root, current.zoom).pop() : flameTree();
  if (DIFF) {
    el("summary").textContent = `base ${fmt(baseOf(root), unit)} → new ${fmt(root[1], unit)} (${signed(root[1] - baseOf(root), unit)})` +
        (re ? ` · matched: base ${fmt(matchTotal(focus, re, baseOf), unit)} → new ${fmt(matchTotal(focus, re, newOf), unit)}` : "");
    renderDiffTable(t.root, unit);
  } else {
    let text = `total ${fmt(t.root[1], unit)}`;
    if (re) {
      const matched = matchTotal(focus, re);
      text += ` · matched ${fmt(matched, unit)} (${(100 * matched / (t.root[1] || 1)).toFixed(1)}%)`;
    }
    if (current.fn !== null) {
      const e = totals().get(current.fn);
      if (e) text += ` · ${DATA.frames[current.fn][0]}: ${fmt(e.total, unit)}${pct(e.total, t.root[1])}`;
    }
    el("summary").textContent = text;
    renderTable(unit);
  }
  writeHash();
}
function matchTotal(n, re, v = newOf) {
  // Count each matching subtree once (outermost match).
  if (re.test(DATA.frames[n[0]][0])) return v(n);
  let s = 0; for (const c of n[2]) s += matchTotal(c, re, v); return s;
}
// An empty profile or value says why, from what the writer knew.
function renderEmpty(t) {
  const box = el("empty"); const p = curProfile();
  if (DIFF || t.root[1] !== 0) { box.hidden = true; return; }
  let why;
  if (!p.samples) {
    const hz = p.period > 0 ? Math.round(1e9 / p.period) : 0;
    why = {
      gpu_memory: "no profiled process allocated device memory (cudaMalloc, cuMemAlloc, cuMemCreate) while gpuflame recorded",
      torch_memory: "no PyTorch caching-allocator block was allocated while gpuflame recorded",
      process_cpu: `no CPU sample was taken: the profiled processes did not run on a CPU while recorded${hz ? ` (sampling ${hz} times a second)` : ""}`,
      gpu_kernel: "no kernel, memcpy or memset was timed: none ran, or kernel time was not collected (CUPTI)",
    }[p.name] || "nothing was recorded for it";
    why = `This profile is empty: it has no samples, ${why}.`;
  } else {
    const others = p.types.filter((x) => x.root[1] !== 0).map((x) => `${x.type} ${fmt(x.root[1], x.unit)}`);
    why = `${t.type} is 0 in all ${p.samples} stacks of this profile` +
        (/^inuse/.test(t.type) ? ": everything they allocated was freed by the end" : "") +
        (others.length ? `. Values that are not empty: ${others.join(", ")}.` : ".");
  }
  if (p.duration_ns > 0) why += ` Recorded for ${fmt(p.duration_ns, "nanoseconds")}.`;
  for (const c of p.comments || []) why += ` ${c}`;
  box.textContent = why;
  box.hidden = false;
}

// ---- Tooltip ------------------------------------------------------------
function hideTip() { el("tip").style.display = "none"; }
// Kept inside the window, whatever its size: right of and below the point
// when it fits, else moved left or above it.
function placeTip(t, x, y) {
  t.style.display = "block";
  const pad = 8, w = t.offsetWidth, h = t.offsetHeight;
  let left = x + 12, top = y + 14;
  if (left + w + pad > window.innerWidth) left = window.innerWidth - w - pad;
  if (top + h + pad > window.innerHeight) top = y - h - 10;
  t.style.left = Math.max(pad, left) + "px";
  t.style.top = Math.max(pad, top) + "px";
}
function lineTable(n, f, unit, total) {
  const lines = linesOf(n);
  if (lines.length <= 1 && !(lines.length === 1 && lines[0].total !== n[1])) return "";
  const file = (f[2] || "").split("/").pop();
  const shown = lines.slice(0, 10);
  let rows = shown.map((l) => `<tr><td>${escapeHtml(file)}:${l.line}</td><td>${fmt(l.total, unit)}${pct(l.total, total)}</td>` +
      `<td>${l.self ? "self " + fmt(l.self, unit) : ""}</td></tr>`).join("");
  const rest = n[1] - lines.reduce((s, l) => s + l.total, 0);
  if (lines.length > shown.length) rows += `<tr><td colspan="3">… ${lines.length - shown.length} more lines</td></tr>`;
  if (rest > 0) rows += `<tr><td>line unknown</td><td>${fmt(rest, unit)}</td><td></td></tr>`;
  return `<br>By line:<table>${rows}</table>`;
}
function tip(n, unit, total, x, y) {
  const f = DATA.frames[n[0]]; const t = el("tip");
  const s = selfOf(n); const lines = linesOf(n);
  const line = lines.length === 1 && lines[0].total === n[1] ? lines[0].line : f[3];
  const loc = f[2] ? `<br>${escapeHtml(f[2])}${line ? ":" + line : ""}` : "";
  t.innerHTML = `<b>${escapeHtml(f[0])}</b>${loc}<br>Total: ${fmt(n[1], unit)}${pct(n[1], total)}` +
      `<br>Self: ${fmt(s, unit)}${pct(s, total)}` + lineTable(n, f, unit, total);
  placeTip(t, x, y);
}
function signed(v, unit) { return (v > 0 ? "+" : "") + fmt(v, unit); }
// Red for growth, blue for shrinkage, deeper in proportion to the change
// against the largest change of any frame (Brendan Gregg's red/blue
// differential flame graphs); grey for no change.
function maxDelta(t) {
  if (t.maxDelta === undefined) {
    let m = 0;
    (function walk(n) { m = Math.max(m, Math.abs(n[1] - baseOf(n))); n[2].forEach(walk); })(t.root);
    t.maxDelta = m;
  }
  return t.maxDelta;
}
function diffColor(n) {
  const delta = n[1] - baseOf(n);
  if (!delta) return "hsl(0, 0%, 84%)";
  const i = Math.min(1, Math.abs(delta) / (maxDelta(curType()) || 1));
  return `hsl(${delta > 0 ? 0 : 215}, 80%, ${Math.round(88 - 40 * i)}%)`;
}
function pct(part, whole) { return whole ? ` (${(100 * part / whole).toFixed(2)}%)` : ""; }
function diffTip(n, unit, x, y) {
  const f = DATA.frames[n[0]]; const t = el("tip"); const root = curType().root;
  const b = baseOf(n), v = n[1], d = v - b;
  const loc = f[2] ? `<br>${escapeHtml(f[2])}${f[3] ? ":" + f[3] : ""}` : "";
  const only = !v && b ? "<br><i>only in BASE: gone in NEW</i>" : v && !b ? "<br><i>only in NEW</i>" : "";
  t.innerHTML = `<b>${escapeHtml(f[0])}</b>${loc}${only}` +
      `<br>Base: ${fmt(b, unit)}${pct(b, baseOf(root))}<br>New: ${fmt(v, unit)}${pct(v, root[1])}` +
      `<br>Delta: ${signed(d, unit)}${b ? ` (${d > 0 ? "+" : ""}${(100 * d / b).toFixed(1)}%)` : ""}` +
      `<br>Self: base ${fmt(selfOf(n, baseOf), unit)}, new ${fmt(selfOf(n, newOf), unit)}`;
  placeTip(t, x, y);
}
function showTipFor(g, i, x, y) {
  const e = g.drawn[i];
  if (DIFF) diffTip(e.n, g.unit, x, y); else tip(e.n, g.unit, g.root[1], x, y);
}
function escapeHtml(s) { return s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c])); }

// ---- Mouse --------------------------------------------------------------
// One listener per graph, not one per frame: 100k frames draw faster.
for (const g of [el("graph"), el("graph2")]) {
  const at = (ev) => (ev.target.dataset && ev.target.dataset.i !== undefined ? +ev.target.dataset.i : -1);
  g.addEventListener("mousemove", (ev) => { const i = at(ev); if (i >= 0) showTipFor(g, i, ev.clientX, ev.clientY); else hideTip(); });
  g.addEventListener("mouseleave", hideTip);
  g.addEventListener("click", (ev) => { const i = at(ev); if (i >= 0) activate(g, i, false); });
}
// A click (or Enter): zoom to the frame; in a sandwich, make its function the
// sandwich's.
function activate(g, i, byKey) {
  const e = g.drawn[i];
  if (current.view === "sandwich") {
    if (e.n[0] !== current.fn && e.parent >= 0) current.fn = e.n[0];
    render();
    return;
  }
  current.zoom = idsTo(g, i);
  render();
  if (byKey) focusFrame(topIndex());
}
function idsTo(g, i) {
  const ids = [];
  for (let j = i; g.drawn[j].parent >= 0; j = g.drawn[j].parent) ids.push(g.drawn[j].n[0]);
  return ids.reverse();
}
// The drawn index of the zoomed frame (the root's when not zoomed).
function topIndex() { return el("graph").top || 0; }

// ---- Keys ---------------------------------------------------------------
let focusIndex = -1;
function focusFrame(i) {
  const g = el("graph"); const d = g.drawn || [];
  if (focusIndex >= 0 && g.children[focusIndex]) g.children[focusIndex].classList.remove("focus");
  focusIndex = i >= 0 && i < d.length ? i : -1;
  if (focusIndex < 0) { hideTip(); return; }
  const div = g.children[focusIndex];
  div.classList.add("focus");
  div.scrollIntoView({ block: "nearest", inline: "nearest" });
  const r = div.getBoundingClientRect();
  showTipFor(g, focusIndex, r.left + Math.min(r.width / 2, 40), r.bottom - 10);
}
function moveFocus(key) {
  const d = el("graph").drawn || [];
  if (!d.length) return;
  if (focusIndex < 0) { focusFrame(topIndex()); return; }
  const e = d[focusIndex];
  if (key === "ArrowUp" && e.parent >= 0) focusFrame(e.parent);
  else if (key === "ArrowDown" && e.kids.length) focusFrame(e.kids[0]);
  else if (key === "ArrowLeft" || key === "ArrowRight") {
    // The next frame drawn on the same row, left or right of this one.
    let best = -1;
    for (let j = 0; j < d.length; j++) {
      if (d[j].depth !== e.depth || j === focusIndex) continue;
      const ok = key === "ArrowLeft" ? d[j].x < e.x : d[j].x > e.x;
      if (ok && (best < 0 || Math.abs(d[j].x - e.x) < Math.abs(d[best].x - e.x))) best = j;
    }
    if (best >= 0) focusFrame(best);
  }
}
document.addEventListener("keydown", (ev) => {
  const typing = ev.target instanceof HTMLInputElement || ev.target instanceof HTMLSelectElement;
  if (ev.key === "Escape") {
    if (typing) { ev.target.blur(); return; }
    if (focusIndex >= 0 && current.zoom.length === 0) { focusFrame(-1); return; }
    if (current.zoom.length) { current.zoom = current.zoom.slice(0, -1); render(); focusFrame(topIndex()); return; }
    if (current.fn !== null) { current.fn = null; render(); }
    return;
  }
  if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  if (ev.key === "/") { ev.preventDefault(); el("search").focus(); el("search").select(); return; }
  if (ev.key.startsWith("Arrow")) { ev.preventDefault(); moveFocus(ev.key); return; }
  if (ev.key === "Enter" && focusIndex >= 0) { ev.preventDefault(); activate(el("graph"), focusIndex, true); return; }
  if (ev.key === "s" && focusIndex >= 0) {
    const f = el("graph").drawn[focusIndex].n[0];
    if (f !== curType().root[0]) { current.fn = f; setView("sandwich"); }
  }
});

// ---- Functions table ------------------------------------------------------
// By function identity (name, kind and file), sortable by any column,
// filtered by a regex; a click highlights the function (zooms to it where it
// is called from one place), its button shows its sandwich.
function topFunction() {
  let best = null;
  for (const e of totals().values())
    if (!isProcess(e.f) && (best === null || e.self > best.self)) best = e;
  return best && best.self > 0 ? best.f : null;
}
function tableRows() {
  const re = regexOf(el("tfilter"));
  const rows = [];
  for (const e of totals().values()) {
    const [name, kind, file] = DATA.frames[e.f];
    if (kind === "process" || (!e.self && !e.total)) continue;
    if (re && !re.test(name) && !re.test(file || "")) continue;
    rows.push({ e, name, file: file || "" });
  }
  const { key, dir } = current.sort;
  const by = key === "name" || key === "file" ? (a, b) => a[key].localeCompare(b[key])
                                               : (a, b) => a.e[key] - b.e[key];
  rows.sort((a, b) => dir * by(a, b) || (b.e.total - a.e.total) || a.name.localeCompare(b.name));
  return rows;
}
function renderTable(unit) {
  const rows = tableRows();
  const body = el("table").tBodies[0]; body.innerHTML = "";
  for (const th of el("table").tHead.rows[0].cells)
    if (th.dataset.key) th.setAttribute("aria-sort", th.dataset.key === current.sort.key ? (current.sort.dir < 0 ? "descending" : "ascending") : "none");
  const shown = rows.slice(0, current.rows);
  for (const { e, name, file } of shown) {
    const tr = body.insertRow();
    tr.dataset.f = e.f;
    if (e.f === current.fn) tr.className = "selected";
    tr.insertCell().textContent = name;
    const fc = tr.insertCell(); fc.className = "file"; fc.textContent = file.split("/").pop(); fc.title = file;
    const s = tr.insertCell(); s.className = "num"; s.textContent = fmt(e.self, unit);
    const t = tr.insertCell(); t.className = "num"; t.textContent = fmt(e.total, unit);
    const b = document.createElement("button"); b.textContent = "sandwich"; b.className = "sandwich";
    b.title = "Show who called this function and what it called";
    tr.insertCell().appendChild(b);
  }
  el("tcount").textContent = `${shown.length} of ${rows.length} functions`;
  const more = el("more");
  more.hidden = rows.length <= shown.length;
  more.textContent = `Show ${Math.min(PAGE_ROWS, rows.length - shown.length)} more (${rows.length - shown.length} not shown)`;
}
el("table").tHead.addEventListener("click", (ev) => {
  const key = ev.target.dataset && ev.target.dataset.key;
  if (!key || DIFF) return;
  current.sort = { key, dir: current.sort.key === key ? -current.sort.dir : key === "name" || key === "file" ? 1 : -1 };
  render();
});
el("table").tBodies[0].addEventListener("click", (ev) => {
  const tr = ev.target.closest("tr");
  if (!tr || tr.dataset.f === undefined) return;
  const f = +tr.dataset.f;
  if (ev.target.classList.contains("sandwich")) { current.fn = f; setView("sandwich"); return; }
  current.fn = current.fn === f && current.view !== "sandwich" ? null : f;
  const e = totals().get(f);
  if (current.view === "flame" && current.fn !== null && e && e.places === 1) current.zoom = e.path;
  render();
});
el("tfilter").oninput = () => { current.rows = PAGE_ROWS; render(); };
el("more").onclick = () => { current.rows += PAGE_ROWS; render(); };

// Functions by how much their total changed, each counted once per stack.
function renderDiffTable(root, unit) {
  const base = new Map(), neu = new Map();
  (function walk(n, seen) {
    const name = DATA.frames[n[0]][0];
    if (!seen.has(name)) { base.set(name, (base.get(name) || 0) + baseOf(n)); neu.set(name, (neu.get(name) || 0) + n[1]); }
    const next = new Set(seen); next.add(name);
    for (const c of n[2]) walk(c, next);
  })(root, new Set());
  const delta = (k) => neu.get(k) - base.get(k);
  const rows = [...neu.keys()].filter((k) => k !== "total" && delta(k) !== 0)
      .sort((a, b) => Math.abs(delta(b)) - Math.abs(delta(a))).slice(0, 50);
  el("table").tHead.rows[0].innerHTML = '<th>Function</th><th class="num">Base</th><th class="num">New</th><th class="num">Delta</th>';
  el("table-tools").hidden = true;
  const body = el("table").tBodies[0]; body.innerHTML = "";
  for (const k of rows) {
    const tr = body.insertRow();
    tr.insertCell().textContent = k;
    for (const v of [fmt(base.get(k), unit), fmt(neu.get(k), unit), signed(delta(k), unit)]) {
      const c = tr.insertCell(); c.className = "num"; c.textContent = v;
    }
  }
}

// ---- View state in the URL ------------------------------------------------
// #profile=…&value=…&view=…&zoom=f.f.f&search=…&fn=f&merge=1: a link or a
// reload shows the same view.
function writeHash() {
  const h = new URLSearchParams();
  h.set("profile", curProfile().name);
  h.set("value", curType().type);
  if (current.view !== "flame") h.set("view", current.view);
  if (current.merge) h.set("merge", "1");
  if (current.zoom.length && current.view !== "sandwich") h.set("zoom", current.zoom.join("."));
  if (el("search").value) h.set("search", el("search").value);
  if (current.fn !== null) h.set("fn", current.fn);
  if (DIFF && current.sizeBy !== "both") h.set("width", current.sizeBy);
  const s = "#" + h.toString();
  if (location.hash !== s) history.replaceState(null, "", s);
}
function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  const p = profiles().findIndex((x) => x.name === h.get("profile"));
  if (p >= 0) current.profile = p;
  fillSelectors();
  if (h.get("value")) fillTypes(h.get("value"));
  current.view = ["flame", "inverted", "sandwich"].includes(h.get("view")) ? h.get("view") : "flame";
  current.merge = h.get("merge") === "1";
  current.zoom = (h.get("zoom") || "").split(".").filter((x) => x !== "").map(Number).filter((x) => x < DATA.frames.length);
  const fn = h.get("fn");
  current.fn = fn !== null && +fn < DATA.frames.length ? +fn : null;
  el("search").value = h.get("search") || "";
  if (DIFF && ["both", "new", "base"].includes(h.get("width"))) { current.sizeBy = h.get("width"); el("sizeby").value = current.sizeBy; }
}
window.addEventListener("hashchange", () => { readHash(); render(); });

// ---- Export of the current view -------------------------------------------
function download(name, blob) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob); a.download = name;
  document.body.appendChild(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}
function exportName(ext) {
  const zoom = current.view === "sandwich" ? "." + DATA.frames[current.fn][0] : "";
  return `${curProfile().name}.${curType().type}.${current.view}${zoom}`.replace(/[^\w.-]+/g, "_") + "." + ext;
}
// The view as folded stacks: the zoomed frame's stacks with the frames above
// it; the inverted view's stacks leaf first; a sandwich's callees.
function viewFolded() {
  if (current.view === "sandwich") {
    const g = el("graph2");
    return g.drawn && g.drawn.length ? foldedLines(g.root, []) : [];
  }
  const path = resolvePath(viewTree(), current.zoom);
  const top = path.pop();
  return foldedLines(top, path.slice(1).map((n) => DATA.frames[n[0]][0]));
}
// The drawn frames as SVG: what is on the screen, names clipped to their box.
function viewSvg() {
  const graphs = [el("graph"), el("graph2")].filter((g) => !g.hidden && g.drawn && g.drawn.length);
  const width = el("graph").clientWidth || 1000;
  const cs = getComputedStyle(document.body);
  const esc = escapeHtml;  // XML wants the same escapes
  let y = 24, body = "", clip = 0;
  const title = `gpuflame ${curProfile().name} ${curType().type} (${current.view}): ${el("summary").textContent}`;
  for (const g of graphs) {
    const rows = Math.max(...g.drawn.map((e) => e.depth)) + 1;
    for (const [i, e] of g.drawn.entries()) {
      const div = g.children[i];
      const x = e.x.toFixed(1), w = Math.max(e.w, 1).toFixed(1), top = y + e.depth * ROW_H;
      const color = getComputedStyle(div).backgroundColor;
      const name = DATA.frames[e.n[0]][0];
      body += `<g><title>${esc(name)}</title><rect x="${x}" y="${top}" width="${w}" height="${ROW_H - 1}" rx="2" fill="${color}"` +
          `${div.classList.contains("dim") ? ' opacity="0.35"' : ""}/>`;
      if (e.w > 30) {
        body += `<clipPath id="c${clip}"><rect x="${x}" y="${top}" width="${w}" height="${ROW_H}"/></clipPath>` +
            `<text x="${(e.x + 3).toFixed(1)}" y="${top + 14}" clip-path="url(#c${clip})">${esc(name)}</text>`;
        clip++;
      }
      body += "</g>";
    }
    y += rows * ROW_H + 16;
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y}" viewBox="0 0 ${width} ${y}" ` +
      `font-family="Helvetica, Arial, sans-serif" font-size="12">` +
      `<rect width="100%" height="100%" fill="${cs.backgroundColor}"/>` +
      `<text x="0" y="16" fill="${cs.color}">${esc(title)}</text><g fill="#1d1d1f">${body}</g></svg>`;
}
function exportView(kind) {
  if (kind === "folded") {
    download(exportName("folded"), new Blob([viewFolded().join("\n") + "\n"], { type: "text/plain" }));
  } else if (kind === "svg") {
    download(exportName("svg"), new Blob([viewSvg()], { type: "image/svg+xml" }));
  } else if (kind === "png") {
    const svg = viewSvg();
    const img = new Image();
    const url = URL.createObjectURL(new Blob([svg], { type: "image/svg+xml" }));
    img.onload = () => {
      const c = document.createElement("canvas");
      c.width = img.width * (window.devicePixelRatio || 1); c.height = img.height * (window.devicePixelRatio || 1);
      const ctx = c.getContext("2d"); ctx.scale(window.devicePixelRatio || 1, window.devicePixelRatio || 1);
      ctx.drawImage(img, 0, 0);
      URL.revokeObjectURL(url);
      c.toBlob((b) => download(exportName("png"), b), "image/png");
    };
    img.src = url;
  }
}
el("export").onchange = (ev) => { const k = ev.target.value; ev.target.value = ""; if (k) exportView(k); };

// ---- Theme ----------------------------------------------------------------
// auto follows prefers-color-scheme; the choice is kept for the next page.
const THEMES = ["auto", "light", "dark"];
function applyTheme(t) {
  if (t === "auto") delete document.documentElement.dataset.theme; else document.documentElement.dataset.theme = t;
  el("theme").textContent = `Theme: ${t}`;
}
let theme = "auto";
try { theme = THEMES.includes(localStorage.getItem("gpuflame-theme")) ? localStorage.getItem("gpuflame-theme") : "auto"; } catch (e) { /* file:// without storage */ }
applyTheme(theme);
el("theme").onclick = () => {
  theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
  applyTheme(theme);
  try { localStorage.setItem("gpuflame-theme", theme); } catch (e) { /* not kept */ }
};

// ---- Controls ---------------------------------------------------------------
function setView(v) { current.view = v; current.zoom = []; render(); }
if (DIFF) {
  el("sizeby-label").hidden = false;
  el("hint").innerHTML = `Diff of <b>${escapeHtml(DIFF.new)}</b> (NEW) against <b>${escapeHtml(DIFF.base)}</b> (BASE). ` +
      `<span class="swatch" style="background:hsl(0,80%,55%)"></span> grew, ` +
      `<span class="swatch" style="background:hsl(215,80%,55%)"></span> shrank, deeper for larger changes; ` +
      `<span class="swatch gone" style="background-color:hsl(215,80%,60%)"></span> only in BASE. ` +
      `Width is base + new unless chosen otherwise. Click a frame to zoom, hover for base, new and delta.`;
}
el("sizeby").onchange = (e) => { current.sizeBy = e.target.value; render(); };
el("profile").onchange = (e) => {
  current.profile = +e.target.value; current.zoom = []; current.fn = null; current.rows = PAGE_ROWS; fillTypes(); render();
};
el("stype").onchange = (e) => { current.type = +e.target.value; current.zoom = []; current.rows = PAGE_ROWS; render(); };
el("view").onchange = (e) => setView(e.target.value);
el("merge").onchange = (e) => { current.merge = e.target.checked; current.zoom = []; render(); };
el("search").oninput = () => render();
el("reset").onclick = () => { current.zoom = []; render(); };
let resizing = 0;
window.onresize = () => { cancelAnimationFrame(resizing); resizing = requestAnimationFrame(render); };
// Notes that head the page (each out-of-memory capture's summary), as text.
for (const n of DATA.notes || []) { const p = document.createElement("p"); p.textContent = n; el("notes").appendChild(p); }
// Stacks that kept growing (record): one row each; a click shows the stack
// in its profile's in use, zoomed to it (its frames found by name, as the
// .folded files write them; under its process where the profile has that level).
function showGrowth(g) {
  const p = profiles().findIndex((x) => x.name === g.profile);
  if (p < 0) return;
  current.profile = p; el("profile").value = p; fillTypes("inuse_space");
  current.view = "flame"; current.fn = null;
  let n = flameTree();
  const ids = [];
  if (byProcess(n)) {
    n = n[2].find((c) => DATA.frames[c[0]][0].endsWith(`(pid ${g.pid})`)) || n;
    if (n !== flameTree()) ids.push(n[0]);
  }
  for (const name of g.stack.split(";")) {
    n = n[2].find((c) => DATA.frames[c[0]][0].replace(/[;\n\r]/g, " ") === name);
    if (!n) break;
    ids.push(n[0]);
  }
  current.zoom = ids;
  render();
}
for (const g of DATA.growth || []) {
  const tr = document.createElement("tr");
  const cells = [`pid ${g.pid}`, g.profile, "+" + fmt(g.growth, "bytes"), `${g.grown}/${g.intervals}`,
                 `${fmt(g.first, "bytes")} → ${fmt(g.last, "bytes")}`, `${g.since.toFixed(2)} s`,
                 g.short];
  cells.forEach((text, i) => {
    const td = document.createElement("td"); td.textContent = text;
    if (i >= 2 && i <= 5) td.className = "num";
    if (i === 6) td.title = g.stack.replaceAll(";", " › ");
    tr.appendChild(td);
  });
  tr.onclick = () => showGrowth(g);
  el("growth").tBodies[0].appendChild(tr);
  el("growth").hidden = false;
}
// It opens on the first profile with something in it, unless the URL says.
if (!location.hash) current.profile = Math.max(0, profiles().findIndex((p) => p.types.some((t) => t.root[1] !== 0)));
readHash();
render();
