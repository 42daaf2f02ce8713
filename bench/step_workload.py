"""The overhead harness's training workload: Trainer.step of
tests/gpu/train_bench.py (the launch-bound GPT unless GPUFLAME_BENCH_MODEL
says otherwise: "large", the ~1B one; "kernels", the kernel loop), in
rounds of steps the harness starts over stdin. One process for every
mode: observers are switched between rounds, so the run-to-run swings of a
fresh process (bimodal on the H200) cancel out."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu"))
import torch  # noqa: E402
import train_bench  # noqa: E402


def main():
    model = os.environ.get("GPUFLAME_BENCH_MODEL", "launch")
    shape = train_bench.SHAPES[model]
    # "kernels": 500 single-kernel in-place ops a step and no allocation, so
    # that the added time over 500 is the cost of one launch.
    trainer = train_bench.KernelLoop(shape.batch) if model == "kernels" else \
        train_bench.Trainer(shape, shape.batch, seed=0)
    for _ in range(shape.warmup):
        trainer.step()
    torch.cuda.synchronize()
    print(f"ready {os.getpid()} torch-train-{model}", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        if cmd[0] == "history":
            # PyTorch's own recorder, for comparison: "history python|all|off".
            if cmd[1] == "off":
                torch.cuda.memory._record_memory_history(enabled=None)
            else:
                torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks=cmd[1],
                                                         max_entries=100000)
            print("ok", flush=True)
            continue
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(int(cmd[1])):
            trainer.step()
        torch.cuda.synchronize()
        print(time.perf_counter_ns() - t0, flush=True)


main()
