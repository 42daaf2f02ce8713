"""Workload for record's signal forwarding: holds 8 MiB of tensors, writes
the file argv[1] (it is running, its probes attached), then waits for
SIGTERM or SIGINT; its handler allocates 4 MiB more (what a shutdown does:
the profiles must include it) and exits 3. With argv[2] "now" it exits at
once after the first allocation; without a signal it gives up after 30 s
(exit 9), so a failing test never hangs. Uses the simulated CUDA runtime
(test fixture)."""
import signal
import sys
import time

import sim_torch

MiB = 1 << 20
kept = []


def before_signal():
    kept.append(sim_torch.empty(8 * MiB))


def on_signal(signum, frame):
    kept.append(sim_torch.empty(4 * MiB))
    sys.exit(3)


before_signal()
if sys.argv[2:] == ["now"]:
    sys.exit(0)
signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)
with open(sys.argv[1], "w") as f:
    f.write("ready")
time.sleep(30)
sys.exit(9)
