// Folded stacks -> the flame graph data frame Grafana's Pyroscope datasource
// builds (pkg/tsdb/grafana-pyroscope-datasource: a nested set in depth-first
// pre-order with a single "total" root; each row's value includes its
// children, self does not). Children in name order, as Pyroscope's tree is.
import { readFileSync } from "node:fs";

export function foldedToFrame(text) {
  const root = { label: "total", children: new Map(), self: 0, value: 0 };
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const at = line.lastIndexOf(" ");
    const value = Number(line.slice(at + 1));
    let node = root;
    node.value += value;
    for (const name of line.slice(0, at).split(";")) {
      if (!node.children.has(name)) node.children.set(name, { label: name, children: new Map(), self: 0, value: 0 });
      node = node.children.get(name);
      node.value += value;
    }
    node.self += value;
  }
  const rows = [];
  const walk = (node, level) => {
    rows.push({ level, value: node.value, self: node.self, label: node.label });
    [...node.children.keys()].sort().forEach((k) => walk(node.children.get(k), level + 1));
  };
  walk(root, 0);
  return rows;
}

export function foldedFileToFrame(path) {
  return foldedToFrame(readFileSync(path, "utf8"));
}
