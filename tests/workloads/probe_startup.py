"""Workload: the probes' sampled tensor events with a start-up exempted (a
test fixture on the simulated allocator). In its first seconds, ten 8 MiB
weights and 200 buffers of 64 KiB from Warmup > fill, all kept; then it
waits until it is argv[2] seconds old plus half a second (its age as the
kernel counts it, from /proc/self/stat's starttime, which is what gpuflame
measures) and churns 64 KiB activations from Trainer > step, each freed at
once, for argv[3] seconds. Writes the number of steps to argv[1] as it
ends: the truth the recording's estimate is held to."""
import os
import sys
import time

import sim_torch


class Loader:
    def load_weights(self):
        return [sim_torch.empty(8 << 20) for _ in range(10)]


class Warmup:
    def fill(self):
        return [sim_torch.empty(64 << 10) for _ in range(200)]


class Trainer:
    def step(self):
        activation = sim_torch.empty(64 << 10)
        del activation


def age_s():
    with open("/proc/self/stat") as f:
        started = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    return time.clock_gettime(time.CLOCK_BOOTTIME) - started


weights = Loader().load_weights()
buffers = Warmup().fill()
if age_s() >= float(sys.argv[2]):
    sys.exit(f"the start-up took {age_s():.1f} s, past the {sys.argv[2]} s exempted")
while age_s() < float(sys.argv[2]) + 0.5:
    time.sleep(0.05)
trainer = Trainer()
steps = 0
end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    trainer.step()
    steps += 1
with open(sys.argv[1], "w") as f:
    f.write(f"{steps}\n")
