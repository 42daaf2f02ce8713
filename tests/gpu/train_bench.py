"""Training-step benchmark for tests/gpu/step_overhead.py (issue 11): a
GPT-like decoder trained the way a user writes it (Trainer.step, bf16
autocast, AdamW), each step timed after a warm-up. Prints one JSON line.

  --model launch   6 narrow layers: every GEMM takes microseconds, so the
                   step (10-20 ms on an H200) is the CPU launching ~500
                   kernels and serving ~600 allocations (~1200 allocator
                   events): where a per-event cost shows most
  --model large    ~1.1B parameters (d_model 2048, 20 layers, seq 1024):
                   a realistic compute-bound step of 100 ms or more
  --model kernels  no model: a step is 500 in-place adds on 4096 floats,
                   one kernel each and no allocation, so a mode's added
                   step time over 500 is what it costs one kernel launch
                   (issue 11's per-kernel target), with Python's few
                   microseconds per op and no allocator in between
  --recorder history-python|history-all
                   PyTorch's own allocator recorder, for comparison
  --recorder torch-profiler
                   torch.profiler with CUDA activity (Kineto's CUPTI
                   tracing) over the warm-up and the timed steps: what
                   CUPTI itself costs a launch, whoever drives it
  --fake           sleep --fake-ms per step instead, without importing
                   torch, to test the driver where there is no GPU
"""
import argparse
import dataclasses
import json
import platform
import signal
import statistics
import sys
import time


@dataclasses.dataclass
class GPTConfig:
    vocab: int
    seq: int
    d_model: int
    n_head: int
    n_layer: int
    dropout: float


@dataclasses.dataclass
class Shape:
    model: GPTConfig | None
    batch: int
    steps: int
    warmup: int


SHAPES = {
    # 8 x 256 tokens through 256-wide layers: GPU work per kernel is a few
    # microseconds, far below the CPU's cost to launch it. Dropout is on, as
    # in small-model training, and adds its kernels and masks.
    "launch": Shape(GPTConfig(vocab=8192, seq=256, d_model=256, n_head=4, n_layer=6, dropout=0.1),
                    batch=8, steps=200, warmup=20),
    # 12 x 1024 tokens: 6 x 1.07e9 parameters x 12288 tokens = 79 TFLOP of
    # GEMMs (+4 of attention) per step, ~130 ms at an eager-mode 650 TFLOP/s,
    # plus ~40 ms of memory-bound work (AdamW's foreach passes over 4.3 GB of
    # fp32 parameters, autocast's weight casts, the gradient norm): >= 100 ms
    # with room to spare, in ~50 GB.
    "large": Shape(GPTConfig(vocab=32768, seq=1024, d_model=2048, n_head=16, n_layer=20, dropout=0.0),
                   batch=12, steps=30, warmup=5),
    # batch: launches per step (KernelLoop); the model is not used.
    "kernels": Shape(None, batch=500, steps=400, warmup=20),
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=SHAPES, default="launch")
    p.add_argument("--steps", type=int, help="timed steps (default: per model)")
    p.add_argument("--warmup", type=int, help="untimed steps first (default: per model)")
    p.add_argument("--batch", type=int, help="sequences per step (default: per model)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--recorder", choices=["none", "history-python", "history-all", "torch-profiler"], default="none")
    p.add_argument("--profiler-trace", help="with --recorder torch-profiler: its Chrome trace to this file")
    p.add_argument("--fake", action="store_true", help="CPU sleep loop, no torch")
    p.add_argument("--fake-ms", type=float, default=2.0, help="step time of --fake")
    p.add_argument("--step-log", help="also each timed step as a line 'end_ns ms' (CLOCK_MONOTONIC), "
                   "written as it ends: for runs watched over time (run_agent_continuous.sh)")
    args = p.parse_args()
    shape = SHAPES[args.model]
    for name in ("steps", "warmup", "batch"):
        if getattr(args, name) is None:
            setattr(args, name, getattr(shape, name))
    if args.steps < 2:
        p.error("--steps must be at least 2 (percentiles)")
    return args


def report(args, step_ms, **extra):
    p10, *_, p90 = statistics.quantiles(step_ms, n=10, method="inclusive")
    print(json.dumps({
        "model": args.model, "recorder": args.recorder, "steps": len(step_ms), "batch": args.batch,
        "step_ms_median": round(statistics.median(step_ms), 4),
        "step_ms_p10": round(p10, 4), "step_ms_p90": round(p90, 4),
        "python": platform.python_version(), **extra,
    }), flush=True)


def run_fake(args):
    for _ in range(args.warmup):
        time.sleep(args.fake_ms / 1e3)
    log = open(args.step_log, "w", buffering=1) if args.step_log else None
    step_ms = []
    last = time.monotonic_ns()
    for _ in range(args.steps):
        time.sleep(args.fake_ms / 1e3)
        now = time.monotonic_ns()
        step_ms.append((now - last) / 1e6)
        if log:
            log.write(f"{now} {step_ms[-1]:.4f}\n")
        last = now
    if log:
        log.close()
    report(args, step_ms, params=0, torch=None, allocs_per_step=None, alloc_retries_per_step=None)


if __name__ == "__main__":
    ARGS = parse_args()
    if ARGS.fake:
        # Before torch is imported, so the driver can be tested without it.
        run_fake(ARGS)
        sys.exit(0)

import torch  # noqa: E402  (after the --fake exit above)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg.n_head
        self.dropout = cfg.dropout
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.resid_drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                           is_causal=True)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_drop(self.proj(y))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.act = nn.GELU(approximate="tanh")
        self.proj = nn.Linear(4 * cfg.d_model, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.drop(self.proj(self.act(self.fc(x))))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab, cfg.d_model)
        self.wpe = nn.Embedding(cfg.seq, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        # GPT-2's initialisation keeps the first losses finite and ordinary.
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class Trainer:
    def __init__(self, shape, batch, seed):
        torch.manual_seed(seed)
        self.cfg = shape.model
        self.batch = batch
        # Built on the GPU directly: initialising 1B parameters on the CPU
        # takes longer than the whole measurement.
        with torch.device("cuda"):
            self.model = GPT(self.cfg)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-4, betas=(0.9, 0.95),
                                           weight_decay=0.1)

    def next_batch(self):
        # Random tokens stand in for a dataset: same kernels, same allocations.
        tokens = torch.randint(self.cfg.vocab, (self.batch, self.cfg.seq + 1), device="cuda")
        return tokens[:, :-1], tokens[:, 1:]

    def step(self):
        x, y = self.next_batch()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = self.model(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss


class KernelLoop:
    """--model kernels: one launch per op, nothing allocated after the first."""

    def __init__(self, launches):
        self.launches = launches
        self.x = torch.zeros(4096, device="cuda")
        self.model = nn.Linear(1, 1)  # for the report's parameter count only

    def step(self):
        for _ in range(self.launches):
            self.x.add_(1.0)


def timed_steps(trainer, steps, log=None):
    # One synchronize per step: each time is one step's CPU and GPU work,
    # with no queue carried into the next.
    torch.cuda.synchronize()
    step_ms = []
    last = time.monotonic_ns()
    for _ in range(steps):
        trainer.step()
        torch.cuda.synchronize()
        now = time.monotonic_ns()
        step_ms.append((now - last) / 1e6)
        if log:
            log.write(f"{now} {step_ms[-1]:.4f}\n")
        last = now
    return step_ms


def main(args):
    if not torch.cuda.is_available():
        print("train_bench.py: CUDA is not available; this benchmark has no CPU fallback "
              "(--fake tests the driver without a GPU)", file=sys.stderr)
        sys.exit(2)
    if args.model == "kernels":
        trainer = KernelLoop(args.batch)
    else:
        trainer = Trainer(SHAPES[args.model], args.batch, args.seed)
    profiler = None
    if args.recorder == "torch-profiler":
        # Entered before the warm-up, so that Kineto's own start-up is not timed.
        profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
        profiler.__enter__()
    elif args.recorder != "none":
        torch.cuda.memory._record_memory_history(enabled="all", context="alloc",
                                                 stacks=args.recorder.removeprefix("history-"),
                                                 max_entries=100000)
    for _ in range(args.warmup):
        trainer.step()
    before = torch.cuda.memory_stats()
    # Line-buffered: a watcher reads it while the steps run.
    log = open(args.step_log, "w", buffering=1) if args.step_log else None
    step_ms = timed_steps(trainer, args.steps, log)
    if log:
        log.close()
    after = torch.cuda.memory_stats()
    kernels = None
    if profiler is not None:
        profiler.__exit__(None, None, None)
        # Proof that it traced: the kernels it saw (warm-up and timed steps).
        kernels = sum(e.count for e in profiler.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA)
        if args.profiler_trace:
            profiler.export_chrome_trace(args.profiler_trace)

    def per_step(key):
        return round((after.get(key, 0) - before.get(key, 0)) / args.steps, 2)

    report(args, step_ms, params=sum(p.numel() for p in trainer.model.parameters()),
           torch=torch.__version__, allocs_per_step=per_step("allocation.all.allocated"),
           alloc_retries_per_step=per_step("num_alloc_retries"),
           **({"profiler_gpu_events": kernels} if kernels is not None else {}))


if __name__ == "__main__":
    # Stopped with SIGTERM (run_agent_continuous.sh), it exits as a program
    # does, through atexit: the injection library's exit handler then runs
    # (GPUFLAME_CUPTI_DEBUG prints what its callbacks cost by path there).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    main(ARGS)
