"""Workload: the thread-group leader ends first (pthread_exit, as a C++
main() may) while another thread goes on allocating: the process is not
over until its last thread is. The leader holds 4 MiB from Loader > load
and starts the worker; the worker, once the leader is gone, holds 8 MiB
from Worker > run, then ends the process by ending itself (no interpreter
teardown: nothing is freed). Uses the simulated CUDA runtime (test fixture)."""
import ctypes
import threading
import time

import sim_torch

MiB = 1 << 20


class Loader:
    def load(self):
        return sim_torch.empty(4 * MiB)


class Worker:
    def run(self):
        time.sleep(0.3)  # the leader is gone by then
        return sim_torch.empty(8 * MiB)


held = []


def work():
    held.append(Worker().run())
    time.sleep(0.3)


held.append(Loader().load())
threading.Thread(target=work).start()
# ctypes lets go of the GIL for the call: the worker runs on without it.
ctypes.CDLL(None).pthread_exit(None)
