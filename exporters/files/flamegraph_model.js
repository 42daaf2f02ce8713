"use strict";
// The flame graph page's data as trees (flamegraph.html): the profile's own
// call tree (one subtree per process, or merged), its inverted (callers) tree,
// and a function's sandwich. No DOM here.
//
// A node is [function, total, children, base, lines]: function indexes
// DATA.frames ([name, kind, file] or, from a diff, [name, kind, file, line]);
// children are widest first; base is BASE's total in a diff (else 0); lines
// is the one source line the whole node comes from, or [line, total, self, ...]
// (html_writer.cc). self = total - the children's totals.

// Trees built here are kept as builders while they grow (children by
// function in a Map) and turned into nodes once.
function builder(f) { return { f, total: 0, base: 0, kids: new Map(), lines: null }; }
function childOf(b, f) {
  let c = b.kids.get(f);
  if (!c) { c = builder(f); b.kids.set(f, c); }
  return c;
}
function finish(b) {
  const kids = [];
  for (const c of b.kids.values()) if (c.total || c.base) kids.push(finish(c));
  kids.sort((x, y) => (y[1] + y[3]) - (x[1] + x[3]));
  let lines;
  if (b.lines && b.lines.size) {
    lines = [];
    for (const [line, v] of [...b.lines].sort((x, y) => y[1][0] - x[1][0])) lines.push(line, v[0], v[1]);
  }
  return [b.f, b.total, kids, b.base, lines];
}
function selfOf(n, v = (x) => x[1]) { let s = v(n); for (const c of n[2]) s -= v(c); return s; }
const newOf = (n) => n[1], baseOf = (n) => n[3] || 0;

// [{line, total, self}] of a node; [] where no line is known.
function linesOf(n) {
  const l = n[4];
  if (typeof l === "number") return [{ line: l, total: n[1], self: selfOf(n) }];
  const out = [];
  if (Array.isArray(l)) for (let i = 0; i + 2 < l.length; i += 3) out.push({ line: l[i], total: l[i + 1], self: l[i + 2] });
  return out;
}
function addLines(b, n, onlySelf) {
  for (const { line, total, self } of linesOf(n)) {
    if (onlySelf && !self) continue;
    if (!b.lines) b.lines = new Map();
    const v = b.lines.get(line) || [0, 0];
    v[0] += onlySelf ? self : total; v[1] += self;
    b.lines.set(line, v);
  }
}
// Adds node n and everything under it into builder b (same function).
function mergeSubtree(b, n) {
  b.total += n[1]; b.base += baseOf(n);
  addLines(b, n, false);
  for (const c of n[2]) mergeSubtree(childOf(b, c[0]), c);
}

const isProcess = (f) => DATA.frames[f][1] === "process";
// Whether the root's children are processes (html_writer.cc adds that level
// when a profile's samples come from more than one).
function byProcess(root) { return root[2].length > 0 && root[2].every((c) => isProcess(c[0])); }
function mergeProcesses(root) {
  const b = builder(root[0]);
  b.total = root[1]; b.base = baseOf(root);
  for (const p of root[2]) for (const c of p[2]) mergeSubtree(childOf(b, c[0]), c);
  return finish(b);
}

// The callers tree: each function's self at the top, who called it below.
// It has a node per distinct reversed stack, often many more than the call
// tree, so a node's callers are only grouped when first asked for (n[2]):
// what is drawn is built, not the rest.
function invert(root) {
  (function link(n) { for (const c of n[2]) { c.up = n; link(c); } })(root);
  // occ: flat [self, base self, node]: a stack's self flowing through node
  // (a frame of this function) on its way up.
  function lazyNode(f, occ, lines) {
    let total = 0, base = 0;
    for (let i = 0; i < occ.length; i += 3) { total += occ[i]; base += occ[i + 1]; }
    const node = [f, total, null, base, lines];
    let kids = null;
    Object.defineProperty(node, 2, { enumerable: true, get() { return kids || (kids = callers(occ)); } });
    return node;
  }
  function callers(occ) {
    const by = new Map();
    for (let i = 0; i < occ.length; i += 3) {
      const up = occ[i + 2].up;
      if (!up || up === root) continue;
      let o = by.get(up[0]);
      if (!o) by.set(up[0], (o = []));
      o.push(occ[i], occ[i + 1], up);
    }
    const kids = [...by].map(([f, o]) => lazyNode(f, o));
    return kids.sort((x, y) => (y[1] + y[3]) - (x[1] + x[3]));
  }
  const leaves = new Map(), lines = new Map();
  (function walk(n) {
    for (const c of n[2]) {
      const s = selfOf(c), bs = selfOf(c, baseOf);
      if (s || bs) {
        let o = leaves.get(c[0]);
        if (!o) { leaves.set(c[0], (o = [])); lines.set(c[0], builder(c[0])); }
        o.push(s, bs, c);
        addLines(lines.get(c[0]), c, true);
      }
      walk(c);
    }
  })(root);
  const kids = [...leaves].map(([f, o]) => lazyNode(f, o, finish(lines.get(f))[4]));
  kids.sort((x, y) => (y[1] + y[3]) - (x[1] + x[3]));
  return [root[0], root[1], kids, baseOf(root), undefined];
}

// A function's sandwich: who called it (callers, it at the top) and what it
// called (callees), each stack counted once (its outermost call).
function sandwich(root, f) {
  const callers = builder(f), callees = builder(f);
  const path = [];
  (function walk(n) {
    if (n[0] === f && path.length) {
      mergeSubtree(callees, n);
      callers.total += n[1]; callers.base += baseOf(n);
      addLines(callers, n, false);
      let cur = callers;
      for (let i = path.length - 2; i >= 1; i--) {  // path[0] is the root, path[-1] is n
        cur = childOf(cur, path[i][0]);
        cur.total += n[1]; cur.base += baseOf(n);
      }
      return;
    }
    for (const c of n[2]) { path.push(c); walk(c); path.pop(); }
  })((path.push(root), root));
  return { callers: finish(callers), callees: finish(callees) };
}

// Per function: self, total (each stack once), and, where it is called from
// one place only, the path to it (function ids below the root).
function functionTotals(root) {
  const out = new Map();
  const onStack = new Map();
  const path = [];
  (function walk(n, top) {
    const f = n[0];
    let e = out.get(f);
    if (!e) { e = { f, self: 0, total: 0, places: 0, path: null }; out.set(f, e); }
    e.self += selfOf(n);
    const depth = onStack.get(f) || 0;
    if (!depth && !top) { e.total += n[1]; e.places++; if (e.places === 1) e.path = path.slice(); }
    onStack.set(f, depth + 1);
    for (const c of n[2]) { path.push(c[0]); walk(c, false); path.pop(); }
    onStack.set(f, depth);
  })(root, true);
  out.delete(root[0]);
  return out;
}

// The nodes from root along function ids; stops where one is not found.
function resolvePath(root, ids) {
  const nodes = [root];
  for (const id of ids) {
    const next = nodes[nodes.length - 1][2].find((c) => c[0] === id);
    if (!next) break;
    nodes.push(next);
  }
  return nodes;
}

// Folded stacks (Brendan Gregg's format, as the .folded files) of node n,
// under the frames named in prefix: each stack's self value once.
function foldedLines(n, prefix, value = (x) => selfOf(x)) {
  const clean = (s) => s.replace(/[;\n\r]/g, " ");
  const out = [];
  const names = prefix.map(clean);
  (function walk(x) {
    names.push(clean(DATA.frames[x[0]][0]));
    const v = value(x);
    if (v) out.push(`${names.join(";")} ${v}`);
    for (const c of x[2]) walk(c);
    names.pop();
  })(n);
  return out;
}

// Values as people read them: bytes in binary units, times by magnitude.
function fmt(v, unit) {
  if (unit === "bytes") {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0, x = Math.abs(v);
    while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
    return (v < 0 ? "-" : "") + (i ? x.toFixed(2) : x) + " " + u[i];
  }
  if (unit === "nanoseconds") {
    const a = Math.abs(v);
    if (a < 1e3) return `${v} ns`;
    const [d, u] = a < 1e6 ? [1e3, "µs"] : a < 1e9 ? [1e6, "ms"] : [1e9, "s"];
    return (v / d).toFixed(2) + " " + u;
  }
  return v.toLocaleString();
}
