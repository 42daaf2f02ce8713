"""Step-time cost of gpuflame's modes on a real training loop (issue 11).

Runs tests/gpu/train_bench.py once per mode per round, each run its own
process. Rounds interleave the modes in an order that changes every round,
so drift of the host (clocks, other tenants, thermal state) lands on every
mode alike; each mode's cost is the ratio of its median step time to the
plain run's of the same round, and the table gives the spread of those
ratios across rounds, not one best run.

Modes (--modes, comma-separated):
  plain                  the workload alone
  record                 gpuflame record (memory, CPU time, kernel time)
  record-no-kernel       record --no-kernel-time
  record-memory          record --no-kernel-time --cpu-hz 0
  record-inprocess       record --no-kernel-time --cpu-hz 0 --tensor-events inprocess
  record-inprocess-full  record --tensor-events inprocess
  history-python         PyTorch's _record_memory_history(stacks="python")
  history-all            the same with stacks="all"
  torch-profiler         torch.profiler with CUDA activity (what CUPTI costs under Kineto)
  NAME=FLAGS             gpuflame record with FLAGS (no commas), to try a new flag

Standard library only: it runs where the workload runs, and here with --fake.
"""
import argparse
import contextlib
import dataclasses
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "train_bench.py")
DEFAULT_MODES = "plain,record,record-no-kernel,record-memory,history-python"


@dataclasses.dataclass
class Mode:
    name: str
    gpuflame_flags: list | None  # None: run the workload without gpuflame
    recorder: str = "none"
    env: dict = dataclasses.field(default_factory=dict)  # added to the environment of the run


KNOWN_MODES = {
    "plain": Mode("plain", None),
    "record": Mode("record", []),
    "record-no-kernel": Mode("record-no-kernel", ["--no-kernel-time"]),
    "record-memory": Mode("record-memory", ["--no-kernel-time", "--cpu-hz", "0"]),
    "record-inprocess": Mode("record-inprocess",
                             ["--no-kernel-time", "--cpu-hz", "0", "--tensor-events", "inprocess"]),
    "record-inprocess-full": Mode("record-inprocess-full", ["--tensor-events", "inprocess"]),
    "history-python": Mode("history-python", None, "history-python"),
    "history-all": Mode("history-all", None, "history-all"),
    "torch-profiler": Mode("torch-profiler", None, "torch-profiler"),
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpuflame", help="the gpuflame binary (needed by the record modes)")
    p.add_argument("--python", default=sys.executable, help="interpreter with torch (default: this one)")
    p.add_argument("--model", choices=["launch", "large", "kernels"], default="launch")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, help="timed steps per run (default: the workload's, per model)")
    p.add_argument("--warmup", type=int, help="untimed steps per run (default: the workload's)")
    p.add_argument("--batch", type=int, help="sequences per step (default: the workload's)")
    p.add_argument("--modes", default=DEFAULT_MODES)
    p.add_argument("--out", help="folder for step_overhead-MODEL.json, every raw per-round result")
    p.add_argument("--time-budget", type=float, default=500,
                   help="seconds; no round is started that would end after it (default 500)")
    p.add_argument("--workload-cpus", help="taskset CPU list for the workload in every mode (e.g. 4), so that "
                   "run-to-run placement does not swamp the differences measured")
    p.add_argument("--gpuflame-cpus", help="taskset CPU list for gpuflame's own threads (e.g. 8-15)")
    p.add_argument("--fake", action="store_true", help="the workload's CPU sleep loop, to test this script")
    return p.parse_args()


def parse_modes(spec):
    modes = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, sep, flags = item.partition("=")
        if sep:
            # Leading KEY=VALUE words are the environment of gpuflame and so of the workload.
            words, env = shlex.split(flags), {}
            while words and "=" in words[0] and not words[0].startswith("-"):
                key, _, value = words.pop(0).partition("=")
                env[key] = value
            modes.append(Mode(name, words, env=env))
        elif name in KNOWN_MODES:
            modes.append(KNOWN_MODES[name])
        else:
            sys.exit(f"step_overhead.py: unknown mode {name!r} (known: {', '.join(KNOWN_MODES)}, or NAME=FLAGS)")
    if len({m.name for m in modes}) != len(modes):
        sys.exit("step_overhead.py: a mode is named twice in --modes")
    if "plain" not in (m.name for m in modes):
        print("adding plain: every ratio is against the plain run of the same round")
        modes.insert(0, KNOWN_MODES["plain"])
    return modes


def runnable_modes(modes, args):
    """Drops the record modes when there is no gpuflame, which only --fake allows."""
    if not any(m.gpuflame_flags is not None for m in modes):
        return modes
    if args.gpuflame and os.access(args.gpuflame, os.X_OK):
        return modes
    if not args.fake:
        sys.exit(f"step_overhead.py: --gpuflame {args.gpuflame!r} is not an executable; the record modes need it")
    skipped = [m.name for m in modes if m.gpuflame_flags is not None]
    print(f"skipping {', '.join(skipped)}: no gpuflame binary (--gpuflame {args.gpuflame!r})")
    return [m for m in modes if m.gpuflame_flags is None]


def round_order(modes, r):
    """Rotated by one every two rounds and reversed every other round, so each
    mode takes each position and follows each neighbour from both sides."""
    k = (r // 2) % len(modes)
    order = modes[k:] + modes[:k]
    return order[::-1] if r % 2 else order


def workload_command(args, mode):
    cmd = [args.python, WORKLOAD, "--model", args.model, "--recorder", mode.recorder]
    for name in ("steps", "warmup", "batch"):
        if getattr(args, name) is not None:
            cmd += [f"--{name}", str(getattr(args, name))]
    return cmd + (["--fake"] if args.fake else [])


def crash_reporter_env(args):
    """Every mode alike, plain included: a crash says where (native frames
    from segv_backtrace.c where the bundle has it, Python's from
    faulthandler) in the run's stderr_tail. Neither costs anything until a
    fatal signal."""
    env = {"PYTHONFAULTHANDLER": "1"}
    lib = os.path.join(os.path.dirname(os.path.abspath(args.gpuflame or "")), "libsegv_backtrace.so")
    if args.gpuflame and os.path.exists(lib):
        env["LD_PRELOAD"] = lib
    return env


def run_mode(args, mode, deadline):
    """One process of one mode: its workload JSON, gpuflame's summary.json
    (record modes) and how it ended."""
    outdir = tempfile.mkdtemp(prefix=f"gpuflame-{mode.name}-") if mode.gpuflame_flags is not None else None
    cmd = workload_command(args, mode)
    if args.workload_cpus:
        cmd = ["taskset", "-c", args.workload_cpus] + cmd
    if outdir:
        cmd = [args.gpuflame, "record", "-q", "-o", outdir, *mode.gpuflame_flags, "--"] + cmd
        if args.gpuflame_cpus:
            cmd = ["taskset", "-c", args.gpuflame_cpus] + cmd
    # A hung run must not take the whole device lease: it gets until a minute
    # past the budget, then its process group (gpuflame and the workload) is killed.
    timeout = max(deadline - time.monotonic(), 0) + 60
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, **crash_reporter_env(args), **mode.env})
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):  # the whole group may have just exited
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        rc = "timeout"
    run = {"mode": mode.name, "cmd": cmd, "rc": rc, "wall_s": round(time.monotonic() - start, 2),
           "result": last_json_line(stdout), "stderr_tail": stderr[-2000:]}
    if outdir:
        run["summary"] = read_summary(outdir)
        shutil.rmtree(outdir, ignore_errors=True)
    return run


def last_json_line(stdout):
    for line in reversed(stdout.splitlines()):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict) and "step_ms_median" in d:
            return d
    return None


def read_summary(outdir):
    try:
        with open(os.path.join(outdir, "summary.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run_rounds(args, modes, save):
    """Runs round after round while the next one fits the time budget; the
    estimate for a round is the longest one so far."""
    t0 = time.monotonic()
    deadline = t0 + args.time_budget
    rounds, longest = [], 0.0
    for r in range(args.rounds):
        if r and time.monotonic() + longest > deadline:
            print(f"time budget: stopping after {r} rounds (a round takes up to {longest:.1f} s, "
                  f"{deadline - time.monotonic():.1f} s left of {args.time_budget:g})")
            break
        start = time.monotonic()
        runs = []
        for mode in round_order(modes, r):
            run = run_mode(args, mode, deadline)
            runs.append(run)
            print(f"round {r + 1}/{args.rounds} {describe_run(run)}", flush=True)
        rounds.append(runs)
        longest = max(longest, time.monotonic() - start)
        save(rounds)
    return rounds


def describe_run(run):
    if run["result"] is None:
        tail = run["stderr_tail"].strip().splitlines()[-3:]
        return f"{run['mode']}: FAILED rc={run['rc']} after {run['wall_s']} s: " + " | ".join(tail)
    return f"{run['mode']}: median {run['result']['step_ms_median']:.3f} ms/step (process {run['wall_s']} s)"


def percentile_range(values, lo, hi):
    """The lo-th and hi-th percentiles (inclusive method; one value: itself)."""
    if len(values) == 1:
        return values[0], values[0]
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[lo - 1], cuts[hi - 1]


def mode_stats(rounds, name):
    """Per-round ratio and difference of a mode's median step to plain's."""
    ratios, deltas, medians = [], [], []
    for runs in rounds:
        by_mode = {run["mode"]: run["result"] for run in runs if run["result"]}
        if name not in by_mode:
            continue
        medians.append(by_mode[name]["step_ms_median"])
        if "plain" in by_mode:
            base = by_mode["plain"]["step_ms_median"]
            ratios.append(medians[-1] / base)
            deltas.append(medians[-1] - base)
    return ratios, deltas, medians


def table(rounds, modes):
    rows = [f"{'mode':24s} {'step ms':>8s} {'ratio':>7s} {'IQR (p25-p75)':>15s} {'min-max':>13s} "
            f"{'+ms/step':>9s} {'rounds':>6s}"]
    for mode in modes:
        ratios, deltas, medians = mode_stats(rounds, mode.name)
        if not medians:
            rows.append(f"{mode.name:24s} {'no successful run':>8s}")
            continue
        step = f"{statistics.median(medians):8.3f}"
        if not ratios:
            rows.append(f"{mode.name:24s} {step} {'(no plain run in the same round)':>7s}")
            continue
        q1, q3 = percentile_range(ratios, 25, 75)
        rows.append(f"{mode.name:24s} {step} {statistics.median(ratios):7.3f} {q1:7.3f}-{q3:<7.3f} "
                    f"{min(ratios):6.3f}-{max(ratios):<6.3f} {statistics.median(deltas):+9.3f} {len(ratios):6d}")
    return "\n".join(rows)


def flatten(d, prefix=""):
    for key, value in d.items():
        if isinstance(value, dict):
            yield from flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def summary_figures(summary):
    """What summary.json says about events, drops and sampling; the keys are
    matched loosely so that counters added later show up too."""
    words = ("event", "drop", "record", "shed", "sampl", "budget", "cost", "launch")
    figures = [f"{key}={value}" for key, value in flatten(summary)
               if isinstance(value, (int, float, str)) and value not in (0, "")
               and any(w in key.rsplit(".", 1)[-1] for w in words)]
    warnings = summary.get("warnings") or []
    if warnings:
        figures.append(f"warnings={len(warnings)}: {warnings[0][:120]}")
    return " ".join(figures) or "(none of the expected keys)"


def print_summaries(rounds):
    for r, runs in enumerate(rounds):
        for run in runs:
            if "summary" in run:
                figures = summary_figures(run["summary"]) if run["summary"] else "no summary.json"
                print(f"round {r + 1} {run['mode']}: {figures}")


def main():
    args = parse_args()
    modes = runnable_modes(parse_modes(args.modes), args)
    path = os.path.join(args.out, f"step_overhead-{args.model}.json") if args.out else None
    if path:
        os.makedirs(args.out, exist_ok=True)

    def save(rounds):
        # After every round, so a run cut short still leaves what it measured.
        if path:
            with open(path, "w") as f:
                json.dump({"args": vars(args), "modes": [dataclasses.asdict(m) for m in modes],
                           "rounds": rounds}, f, indent=1)

    print(f"== {args.model}: {len(modes)} modes x {args.rounds} rounds, interleaved "
          f"({', '.join(m.name for m in modes)})", flush=True)
    rounds = run_rounds(args, modes, save)
    plain = [run["result"] for runs in rounds for run in runs if run["mode"] == "plain" and run["result"]]
    if plain:
        p = plain[0]
        print(f"== workload: {p.get('params')} parameters, batch {p.get('batch')}, {p.get('steps')} timed steps, "
              f"{p.get('allocs_per_step')} allocations/step ({p.get('alloc_retries_per_step')} retries), "
              f"torch {p.get('torch')}, python {p.get('python')}")
    print("== step time vs plain, per-round ratios of median step times")
    print(table(rounds, modes))
    print_summaries(rounds)
    if path:
        print(f"raw results: {path}")
    failed = sum(run["result"] is None for runs in rounds for run in runs)
    return 1 if failed or not rounds else 0


if __name__ == "__main__":
    sys.exit(main())
