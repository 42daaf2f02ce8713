#!/usr/bin/env python3
"""Which API calls a copy's or memset's activity record is correlated with,
and whether libcuda's exported copy entry points see those calls: the
question before the launch route (profiler/process/launch_route_sites.h)
can take copies' stacks by uprobe as it does launches'.

Reads the records of tests/gpu/api_records.c (API_RECORDS=copies: every
driver and runtime call's API record, copies', memsets' and kernels') and
the hits of bench/launch_uprobes.cc --symbols (copy entry points, cookie =
position in SYMBOLS). Prints, for copies and memsets, the share whose
correlation ID is a driver record's and a runtime record's, by call ID;
then, per entry point, its hits against the driver records of its call ID,
and how many of those records have a hit on their thread just before them.

  copy_correlation.py HITS RECORDS
"""
import bisect
import collections
import sys

from join_launches import clock_offset

# The entry points run_copy_correlation.sh attaches, in its order, with the
# CUPTI driver call ID of each (cupti_driver_cbid.h).
SYMBOLS = [("cuMemcpyAsync", 306), ("cuMemcpyAsync_ptsz", 418), ("cuMemcpyHtoDAsync_v2", 277),
           ("cuMemcpyDtoHAsync_v2", 279), ("cuMemcpyDtoDAsync_v2", 281), ("cuMemcpy", 305),
           ("cuMemcpyHtoD_v2", 276), ("cuMemcpyDtoH_v2", 278), ("cuMemcpyDtoD_v2", 280),
           ("cuMemsetD8Async", 216), ("cuMemsetD32Async", 220), ("cuMemsetD8_v2", 249),
           ("cuMemsetD32_v2", 251), ("cuMemcpyHtoDAsync_v2_ptsz", 421), ("cuMemcpyDtoHAsync_v2_ptsz", 422),
           ("cuMemcpyDtoDAsync_v2_ptsz", 423)]
LEAD_NS = 20_000_000  # the route's bound (launch_route_joiner.h kMaxLeadNs)


def main():
    hits_path, records_path = sys.argv[1], sys.argv[2]
    pid, clocks = 0, []
    api = {"D": {}, "R": {}}  # kind -> correlation -> cbid
    driver_by_tid = collections.defaultdict(list)
    copies, memsets, kernels = [], [], []
    with open(records_path) as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            if p[0] == "p":
                pid = int(p[1])
            elif p[0] == "c":
                clocks.append(tuple(int(x) for x in p[1:4]))
            elif p[0] == "a" and len(p) == 7:
                kind, cbid, tid, start, corr = p[1], int(p[2]), int(p[3]), int(p[4]), int(p[6])
                api[kind][corr] = cbid
                if kind == "D":
                    driver_by_tid[tid].append((start, cbid))
            elif p[0] == "m":
                copies.append((int(p[1]), int(p[2])))
            elif p[0] == "s":
                memsets.append(int(p[1]))
            elif p[0] == "k":
                kernels.append(int(p[1]))
    for what, ids in (("copies", [c for c, _ in copies]), ("memsets", memsets), ("kernels", kernels)):
        d = collections.Counter(api["D"].get(c, -1) for c in ids)
        r = collections.Counter(api["R"].get(c, -1) for c in ids)
        print(f"{what}: {len(ids)}; by the driver record of the same ID (cbid: n; -1 none): {dict(d.most_common(8))}; "
              f"by the runtime record's: {dict(r.most_common(8))}")
    print(f"copy kinds (CUpti_ActivityMemcpyKind: n): {dict(collections.Counter(k for _, k in copies))}")

    offset = clock_offset(clocks)[0][0] if len(clocks) >= 2 else None
    hits = collections.defaultdict(list)  # (tid, symbol) -> monotonic ns
    by_symbol = collections.Counter()
    with open(hits_path) as f:
        for line in f:
            p = line.split()
            if len(p) == 4 and int(p[0]) == pid:
                hits[(int(p[1]), int(p[3]))].append(int(p[2]))
                by_symbol[int(p[3])] += 1
    for hs in hits.values():
        hs.sort()
    records_by_cbid = collections.Counter(c for rs in driver_by_tid.values() for _, c in rs)
    print(f"process {pid}; CUPTI clock - monotonic {offset} ns")
    for i, (name, cbid) in enumerate(SYMBOLS):
        n_rec, n_hit = records_by_cbid.get(cbid, 0), by_symbol.get(i, 0)
        if not n_rec and not n_hit:
            continue
        joined = 0
        for tid, rs in driver_by_tid.items():
            hs = hits.get((tid, i), [])
            for start, c in rs:
                if c != cbid or offset is None:
                    continue
                at = bisect.bisect_right(hs, start - offset) - 1
                joined += at >= 0 and start - offset - hs[at] <= LEAD_NS
        print(f"{name} (cbid {cbid}): {n_hit} hits, {n_rec} driver records, {joined} records with a hit "
              f"on their thread within {LEAD_NS // 1_000_000} ms before")


if __name__ == "__main__":
    main()
