#!/usr/bin/env python3
"""Joins uprobe hits on libcuda's launch entry points (bench/launch_uprobes.cc
--out) to CUPTI's API activity records of the same calls and to the kernels
they launched (tests/gpu/api_records.c, API_RECORDS_OUT): the launch-stack
route without CUPTI's callbacks, checked on a GPU before it is built.

Each hit is matched to the first launch record on its thread that starts
at or after its time on CUPTI's clock (CLOCK_MONOTONIC moved by the offset
the clock lines measured, within --tolerance-ns), no more than --slack-ns
after it. Prints
what share of hits, records and kernels joined, and how far a hit's time
lies from its record's start.

  join_launches.py HITS RECORDS [--pid PID] [--slack-ns NS] [--tolerance-ns NS] [--expect-joined PCT]
"""
import argparse
import bisect
import collections
import statistics
import sys


def clock_offset(lines):
    """CUPTI's clock minus CLOCK_MONOTONIC: at start and at exit, each from
    its tightest read (before, cupti, after). The client writes five reads
    at each; a run that did not exit cleanly has the start's alone, and then
    the start's offset stands for both (a drift measured over microseconds
    would turn the reads' noise into milliseconds)."""
    samples = [(b, c, a) for b, c, a in lines]
    parts = [samples[:5], samples[5:]] if len(samples) >= 10 else [samples, samples]
    out = []
    for part in parts:
        b, c, a = min(part, key=lambda s: s[2] - s[0])
        out.append((c - (a + b) // 2, a - b, (a + b) // 2))
    if out[1][2] - out[0][2] < 1_000_000_000:
        out[1] = (out[0][0], out[1][1], out[0][2] + 1_000_000_000)
    return out


def quantiles(xs):
    if not xs:
        return "none"
    xs = sorted(xs)
    q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))]
    return f"p1 {q(0.01)} p50 {q(0.5)} p99 {q(0.99)} (n {len(xs)})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hits")
    ap.add_argument("records")
    ap.add_argument("--pid", type=int, default=0)
    ap.add_argument("--slack-ns", type=int, default=1000000)
    ap.add_argument("--tolerance-ns", type=int, default=1000)
    ap.add_argument("--expect-joined", type=float, default=0,
                    help="exit 1 unless at least this share (%%) of kernels joined a hit")
    args = ap.parse_args()

    clocks, records, kernel_ids, record_pid = [], collections.defaultdict(list), [], 0
    kinds = collections.Counter()
    with open(args.records) as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            if p[0] == "p" and len(p) == 2:
                record_pid = int(p[1])
            elif p[0] == "c":
                clocks.append(tuple(int(x) for x in p[1:4]))
            elif p[0] == "a":
                kind, cbid, tid, start, end, corr = p[1], int(p[2]), int(p[3]), int(p[4]), int(p[5]), int(p[6])
                kinds[kind] += 1
                if kind == "D":
                    records[tid].append([start, end, corr, cbid, False])
            elif p[0] == "k":
                kernel_ids.append(int(p[1]))
    if len(clocks) < 2:
        sys.exit("join_launches: no clock lines in the records")
    (off0, w0, t0), (off1, w1, t1) = clock_offset(clocks)
    if len(clocks) < 10:
        print("join: no clock reads from the client's exit (it did not exit cleanly): the start's offset throughout")
    print(f"join: CUPTI clock - monotonic: {off0} ns at start (read within {w0} ns), {off1} at exit "
          f"(within {w1} ns): drift {off1 - off0} ns over {(t1 - t0) / 1e9:.1f} s")

    hits = collections.defaultdict(list)
    pids = collections.Counter()
    with open(args.hits) as f:
        for line in f:
            p = line.split()
            if len(p) == 4:
                pids[int(p[0])] += 1
                hits[(int(p[0]), int(p[1]))].append((int(p[2]), int(p[3])))
    # The uprobes see every process that maps libcuda: the one the records
    # came from, else the one with most hits.
    pid = args.pid or record_pid or (pids.most_common(1)[0][0] if pids else 0)
    mine = {tid: hs for (p, tid), hs in hits.items() if p == pid}
    n_hits = sum(len(h) for h in mine.values())
    n_records = sum(len(r) for r in records.values())
    print(f"join: process {pid}: {n_hits} uprobe hits on {len(mine)} threads; {n_records} driver launch records "
          f"on {len(records)} threads ({dict(kinds)} API records in all); {len(kernel_ids)} kernel records")
    print(f"join: threads with hits but no records: {sorted(set(mine) - set(records))[:8]}; "
          f"with records but no hits: {sorted(set(records) - set(mine))[:8]}")

    for rs in records.values():
        rs.sort()
    # A thread's launch calls do not overlap, and the uprobe fires at the
    # entry point, before CUPTI's start inside it: each hit belongs to the
    # first record that starts at or after it (within --tolerance-ns of the
    # clocks' offset), if the record before has ended by then. A thread
    # descheduled between the two moves nothing; a nearest-start rule
    # would give such a hit the call before.
    deltas, unmatched, inside, doubled = [], 0, 0, 0
    tol = args.tolerance_ns
    for tid, hs in mine.items():
        rs = records.get(tid, [])
        starts = [r[0] for r in rs]
        for ns, _ in hs:
            t = ns + off0 + (off1 - off0) * (ns - t0) // max(1, t1 - t0)
            i = bisect.bisect_left(starts, t - tol)
            if i > 0 and rs[i - 1][1] > t + tol:
                inside += 1  # within the call before: not a launch of its own
                continue
            if i == len(rs) or rs[i][0] - t > args.slack_ns:
                unmatched += 1
                continue
            if rs[i][4]:
                doubled += 1
                continue
            rs[i][4] = True
            deltas.append(rs[i][0] - t)
    matched = len(deltas)
    print(f"join: {matched} of {n_hits} hits matched a record ({100 * matched / max(1, n_hits):.2f}%); "
          f"{unmatched} found none within {args.slack_ns} ns, {inside} fell inside a call, {doubled} met a "
          f"record another hit had taken")
    print(f"join: record start - hit time, ns: {quantiles(deltas)}")
    durations = [r[1] - r[0] for rs in records.values() for r in rs]
    print(f"join: launch call durations, ns: {quantiles(durations)}")

    by_corr = {r[2]: r[4] for rs in records.values() for r in rs}
    in_records = sum(1 for k in kernel_ids if k in by_corr)
    joined = sum(1 for k in kernel_ids if by_corr.get(k))
    print(f"join: kernels whose correlation ID has a driver launch record: {in_records} of {len(kernel_ids)} "
          f"({100 * in_records / max(1, len(kernel_ids)):.2f}%); whose record matched a hit (a stack): {joined} "
          f"({100 * joined / max(1, len(kernel_ids)):.2f}%)")
    if 100 * joined < args.expect_joined * max(1, len(kernel_ids)) or not kernel_ids:
        sys.exit(f"join_launches: fewer than {args.expect_joined}% of the kernels joined a hit")


if __name__ == "__main__":
    main()
