"""Workload: a training step whose backward() runs on autograd's engine
thread, on the simulated libtorch (test fixture): libtorch_python.so calls
torch::autograd::Engine::execute with the GIL released, and the engine
thread `pt_autograd_0` (no Python state) allocates and launches.

  Trainer > step (x2)   forward: 2 x 8 MiB on this thread, freed at the end of the step
                        backward(): on the engine thread, 4 MiB freed + 4 MiB kept (the grad),
                        and 5 MulBackward kernels of 200 us
  engine_idle           the engine thread alone, no backward() running: 2 x 1 MiB (1 kept),
                        3 kernels of 100 us: no Python caller to name
  Trainer > failing_step  backward() whose engine throws after 2 x 2 MiB (1 kept): caught
  engine_idle           again, 2 x 3 MiB (1 kept): the failed call no longer runs
  Worker > run (x2)     two threads in backward() at once: 2 x 5 MiB each (1 kept); at least
                        one call's work runs while both do, so whose it is cannot be told
"""
import threading

import sim_torch

MiB = 1 << 20


class Trainer:
    def step(self):
        activations = [sim_torch.empty(8 * MiB), sim_torch.empty(8 * MiB)]
        sim_torch.backward(4 * MiB, kernels=5, micros=200)
        del activations

    def failing_step(self):
        try:
            sim_torch.backward(2 * MiB, fail=True)
        except RuntimeError:
            pass


def engine_idle(nbytes, kernels=0):
    sim_torch.engine_thread_work(nbytes, kernels=kernels, micros=100)


class Worker(threading.Thread):
    def run(self):
        sim_torch.backward(5 * MiB, wait_for_calls=2)


def main():
    trainer = Trainer()
    for _ in range(2):
        trainer.step()
    engine_idle(1 * MiB, kernels=3)
    trainer.failing_step()
    engine_idle(3 * MiB)
    workers = [Worker(), Worker()]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


main()
