// The flame graph page's trees (exporters/files/flamegraph_model.js) on small
// hand-made profiles whose answers are known, recursion included: the
// inverted tree, a sandwich, per-function totals, merged processes, folded
// export and units. No browser: the page's script runs in a plain context.
// Usage: node flamegraph_model_test.mjs MODEL_JS
import { readFileSync } from "node:fs";
import vm from "node:vm";

const fail = (msg) => { console.error(`FAIL: ${msg}`); process.exit(1); };
const eq = (got, want, what) => {
  if (JSON.stringify(got) !== JSON.stringify(want)) fail(`${what}: ${JSON.stringify(got)}, not ${JSON.stringify(want)}`);
};
// Frames: 0 total, 1 main, 2 a, 3 b, 4 alloc, 5 and 6 two processes.
const DATA = { frames: [["total", "marker", ""], ["main", "python", "m.py"], ["a", "python", "m.py"], ["b", "python", "m.py"],
                        ["alloc", "api", ""], ["python3 (pid 1)", "process", ""], ["python3 (pid 2)", "process", ""]] };
const ctx = vm.createContext({ DATA });
vm.runInContext(readFileSync(process.argv[2], "utf8"), ctx);
const m = (src) => vm.runInContext(src, ctx);

// main -> a -> a -> alloc (10), main -> b -> a -> alloc (5), main -> b (2 itself).
// a recurses; its lines: 7 (10 through, the recursion's outer call) and 9.
ctx.root = [0, 17, [[1, 17, [[2, 10, [[2, 10, [[4, 10, []]], 0, 8]], 0, [7, 10, 0]],
                            [3, 7, [[2, 5, [[4, 5, []]], 0, 9]], 0, 4]], 0, 3]]];
// Names of a tree, nested: [name, total, [children]].
const shape = (n) => [DATA.frames[n[0]][0], n[1], n[2].map(shape)];

// Inverted: alloc's self (15) at the top, called from a (15): from a (10,
// the recursion) and from b (5); b's self (2) called by main.
eq(shape(m("invert(root)")), ["total", 17, [
  ["alloc", 15, [["a", 15, [["a", 10, [["main", 10, []]]], ["b", 5, [["main", 5, []]]]]]]],
  ["b", 2, [["main", 2, []]]]]], "inverted tree");

// Sandwich of a: each stack once (the outer a of the recursion): 15; its
// callers main (10) and b -> main (5); its callees with the inner a merged in.
const s = m("sandwich(root, 2)");
eq(shape(s.callers), ["a", 15, [["main", 10, []], ["b", 5, [["main", 5, []]]]]], "sandwich callers");
eq(shape(s.callees), ["a", 15, [["a", 10, [["alloc", 10, []]]], ["alloc", 5, []]]], "sandwich callees");
// Its lines: 7 (10 total) and 9 (5), merged from both stacks.
eq(m("linesOf(sandwich(root, 2).callers)").map((l) => [l.line, l.total]), [[7, 10], [9, 5]], "sandwich lines");

// Per function: a's total counts the recursion once; alloc is called from
// two places, b from one (its path known).
const t = m("[...functionTotals(root).values()].map((e) => [DATA.frames[e.f][0], e.self, e.total, e.places, e.path])");
eq(t, [["main", 0, 17, 1, [1]], ["a", 0, 15, 2, [1, 2]], ["alloc", 15, 15, 2, [1, 2, 2, 4]], ["b", 2, 7, 1, [1, 3]]],
   "function totals");

// Two processes merged: their subtrees added by function.
ctx.procs = [0, 9, [[5, 6, [[1, 6, [[2, 6, []]], 0, 3]]], [6, 3, [[1, 3, [[3, 3, []]], 0, 4]]]]];
eq(m("byProcess(procs)"), true, "process level seen");
eq(m("byProcess(root)"), false, "no process level");
eq(shape(m("mergeProcesses(procs)")), ["total", 9, [["main", 9, [["a", 6, []], ["b", 3, []]]]]], "merged processes");
eq(m("linesOf(mergeProcesses(procs)[2][0])").map((l) => [l.line, l.total]), [[3, 6], [4, 3]], "merged lines");

// Folded export of b, under main: its stacks' self values.
eq(m("foldedLines(root[2][0][2][1], ['main'])"), ["main;b 2", "main;b;a;alloc 5"], "folded");

// Units.
eq(["999 ns", "1.50 µs", "2.50 ms", "3.20 s", "-2.00 ms"], [999, 1500, 2.5e6, 3.2e9, -2e6].map((v) => m(`fmt(${v}, "nanoseconds")`)), "time units");
eq(m('fmt(1536, "bytes")'), "1.50 KiB", "bytes");
console.log("ok: inverted, sandwich, totals, processes, folded, units");
