// The page the browser test renders: Grafana's own flame graph component
// (@grafana/flamegraph, as in Grafana's flame graph panel), fed the data
// frame the Pyroscope datasource hands Grafana, built from a gpuflame profile.
import React from "react";
import { createRoot } from "react-dom/client";
import { createDataFrame, createTheme, FieldType } from "@grafana/data";
import { FlameGraph } from "@grafana/flamegraph";

const rows = window.GPUFLAME_FRAME;  // {level, value, self, label}[], depth-first
const frame = createDataFrame({
  name: "response",
  meta: { preferredVisualisationType: "flamegraph" },
  fields: [
    { name: "level", type: FieldType.number, values: rows.map((r) => r.level) },
    { name: "value", type: FieldType.number, values: rows.map((r) => r.value), config: { unit: window.GPUFLAME_UNIT } },
    { name: "self", type: FieldType.number, values: rows.map((r) => r.self), config: { unit: window.GPUFLAME_UNIT } },
    { name: "label", type: FieldType.string, values: rows.map((r) => r.label) },
  ],
});
const theme = createTheme({ colors: { mode: "dark" } });
document.body.style.background = theme.colors.background.primary;
createRoot(document.getElementById("root")).render(
  <div style={{ height: "900px", padding: "8px" }}>
    <FlameGraph data={frame} getTheme={() => theme} disableCollapsing={true} />
  </div>
);
