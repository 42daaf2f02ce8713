// Why is the GPU idle (record's summary.json "utilization", DATA.utilization):
// per GPU of each process, its verdict and why on top, the four numbers, a
// strip of each window's busy and idle-gap shares, the kernel-duration
// histogram, and a button to the idle-time flame graph (gpu_idle). Built
// with DOM calls and textContent only: process names and frames are the
// workload's, hostile text.
// A scope of its own: its names stay out of flamegraph.js's.
(() => {
  const SVG = "http://www.w3.org/2000/svg";
  function svgEl(tag, attrs, title) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (title) { const t = document.createElementNS(SVG, "title"); t.textContent = title; e.appendChild(t); }
    return e;
  }
  const pct = (x) => `${(100 * x).toFixed(1)}%`;
  const micros = (us) => us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(1)} µs`;

  // The strip: at most 600 columns, each the mean of the windows it covers.
  function utilizationStrip(w) {
    const n = w.busy.length, cols = Math.min(n, 600), per = n / cols, H = 36;
    const svg = svgEl("svg", { class: "strip", viewBox: `0 0 ${cols} ${H}`, preserveAspectRatio: "none",
                               role: "img", "aria-label": `busy and idle gaps in ${n} windows of ${w.ms} ms` });
    for (let c = 0; c < cols; c++) {
      const a = Math.floor(c * per), b = Math.max(a + 1, Math.floor((c + 1) * per));
      let busy = 0, gap = 0;
      for (let i = a; i < b; i++) { busy += w.busy[i]; gap += w.idle_gap[i]; }
      busy /= b - a; gap /= b - a;
      const label = `${((a * w.ms) / 1000).toFixed(1)} s: busy ${pct(busy)}, idle gaps ${pct(gap)}`;
      svg.appendChild(svgEl("rect", { class: "busy", x: c, width: 1, y: H * (1 - busy), height: H * busy }, label));
      svg.appendChild(svgEl("rect", { class: "gap", x: c, width: 1, y: 0, height: H * gap }, label));
    }
    return svg;
  }

  // The histogram: one bar per bucket ([lower bound ns, kernels]) on a log
  // time axis, labelled at the decades.
  function kernelHistogram(buckets) {
    // The axis runs from the decade below the shortest kernel to the one above the longest.
    const W = 600, H = 60, lo = Math.floor(Math.log10(Math.max(1, buckets[0][0])));
    const top = Math.max(lo + 1, Math.ceil(Math.log10(buckets.at(-1)[0] * 1.05 + 1)));
    const span = top - lo, most = Math.max(...buckets.map((b) => b[1]));
    const x = (ns) => ((Math.log10(Math.max(1, ns)) - lo) / span) * (W - 2) + 1;
    const svg = svgEl("svg", { class: "histogram", viewBox: `0 0 ${W} ${H + 14}`, role: "img",
                               "aria-label": "kernel durations" });
    buckets.forEach(([ns, count], i) => {
      const next = i + 1 < buckets.length ? buckets[i + 1][0] : ns * 1.05;
      const h = (H * count) / most;
      svg.appendChild(svgEl("rect", { class: "bar", x: x(ns), width: Math.max(1, x(next) - x(ns) - 0.5), y: H - h,
                                      height: h }, `${micros(ns / 1000)}: ${count.toLocaleString()} kernels`));
    });
    for (let d = lo; d <= top; d++) {
      const t = svgEl("text", { x: Math.min(W - 20, Math.max(20, x(10 ** d))), y: H + 12, class: "tick" });
      t.textContent = micros(10 ** d / 1000);
      svg.appendChild(t);
    }
    return svg;
  }

  // The driver's readings of the lane's GPU (summary.json devices[].series):
  // classic utilisation and, where the GPU has GPM, SMs active and DRAM
  // bandwidth, as lines over its own time axis (the readings', from the
  // first; not aligned with the strip above, which is CUPTI's).
  function driverLines(series) {
    const n = series.t_s.length, W = 600, H = 36;
    const end = Math.max(series.t_s[n - 1], 1e-9);
    const svg = svgEl("svg", { class: "driver", viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img",
                               "aria-label": `the driver's readings: ${n}` });
    for (const [key, cls, what] of [["utilization_gpu_pct", "util", "a kernel running"],
                                    ["gpm_sm_active_pct", "sm", "SMs active (GPM)"],
                                    ["gpm_dram_bandwidth_pct", "dram", "DRAM bandwidth (GPM)"]]) {
      const pts = [];
      series[key].forEach((v, i) => {
        if (v !== null) pts.push(`${((series.t_s[i] / end) * W).toFixed(1)},${(H - (H * v) / 100).toFixed(1)}`);
      });
      if (pts.length > 1) svg.appendChild(svgEl("polyline", { class: cls, points: pts.join(" ") }, what));
    }
    return svg;
  }

  function showIdleProfile() {
    const p = profiles().findIndex((x) => x.name === "gpu_idle");
    if (p < 0) return;
    current.profile = p; el("profile").value = p; current.zoom = []; current.fn = null; fillTypes(); render();
    el("graph").scrollIntoView();
  }

  for (const g of (DATA.utilization && DATA.utilization.gpus) || []) {
    const box = document.createElement("div");
    box.className = "gpu";
    const h = document.createElement("h2");
    h.textContent = `GPU ${g.gpu} of pid ${g.pid} (${g.process || "?"}): `;
    const v = document.createElement("span");
    v.className = `verdict ${g.verdict}`; v.textContent = g.verdict.replace("_", " ");
    h.appendChild(v);
    box.appendChild(h);
    const why = document.createElement("p");
    why.textContent = g.reason;
    box.appendChild(why);
    const s = g.steady, k = s.kernels;
    const nums = document.createElement("p");
    nums.className = "hint";
    nums.textContent = `busy ${pct(s.busy_ratio)}, idle gaps ${pct(s.idle_gaps.ratio)} (${s.idle_gaps.count}) of ` +
        `${s.span_s.toFixed(2)} s; ${k.count.toLocaleString()} kernels, P50 ${micros(k.p50_us)}, P95 ` +
        `${micros(k.p95_us)}, ${pct(k.under_10us_ratio)} under 10 µs` +
        (g.start_up ? `; the first ${g.start_up.seconds.toFixed(2)} s set apart as start-up` : "");
    box.appendChild(nums);
    if (g.windows && g.windows.busy.length) box.appendChild(utilizationStrip(g.windows));
    const device = g.nvml && g.nvml.index !== undefined &&
        (DATA.utilization.devices || []).find((d) => d.index === g.nvml.index);
    if (device && device.series && device.series.t_s.length > 1) {
      const cap = document.createElement("p");
      cap.className = "hint";
      cap.textContent = `NVML GPU ${device.index} (${device.name || "?"}), ${device.series.t_s.length} readings over ` +
          `${device.series.t_s.at(-1).toFixed(1)} s: a kernel running (grey), SMs active (green) and DRAM ` +
          "bandwidth (blue) where GPM has them";
      box.appendChild(cap);
      box.appendChild(driverLines(device.series));
    }
    if (g.kernel_histogram_ns && g.kernel_histogram_ns.length) box.appendChild(kernelHistogram(g.kernel_histogram_ns));
    if (profiles().some((x) => x.name === "gpu_idle")) {
      const b = document.createElement("button");
      b.textContent = "Idle-time flame graph (gpu_idle)";
      b.onclick = showIdleProfile;
      box.appendChild(b);
    }
    el("gpus").appendChild(box);
    el("gpus").hidden = false;
  }
})();
