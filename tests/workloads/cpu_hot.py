"""Workload: a known CPU hot spot. Trainer > step spends its time in
hot_loop (pure Python arithmetic, ~1 s of CPU), then idles in time.sleep,
which must cost (almost) no CPU time. Touches the simulated CUDA runtime
(test fixture) so that machine-wide discovery finds it."""
import time

import sim_torch

MiB = 1 << 20


def hot_loop(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def idle():
    time.sleep(0.6)


class Trainer:
    def step(self):
        deadline = time.process_time() + 1.0
        while time.process_time() < deadline:
            hot_loop(20000)
        idle()


weights = sim_torch.empty(1 * MiB)
Trainer().step()
