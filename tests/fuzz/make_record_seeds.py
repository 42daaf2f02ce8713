#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz/record_fuzzer.cc: valid runs of
ring-buffer records of each kind, framed as the fuzzer reads its input.

    tests/fuzz/make_record_seeds.py [OUT_DIR]   (default: tests/fuzz/corpus/record)

Layouts and constants come from bpf/gpuflame_abi.h: enum values and #defines
are read from it, and each struct format below is checked against the size
the header asserts, so a changed ABI fails here instead of writing seeds the
decoder rejects. Seeds are deterministic: rerun after an ABI change and
commit what changes. Files named crash-* (reproducers) are left alone.

Input framing (record_fuzzer.cc): each record is preceded by its length as a
little-endian u16; the length 0xffff is followed by one control byte instead
(0: toggle frozen stacks, 1: flush the kernel joiner, 2: retire exited
processes, 3: time passes for out-of-memory episodes).
"""
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ABI_H = os.path.join(HERE, "..", "..", "bpf", "gpuflame_abi.h")

# struct formats, little-endian, no implicit padding (the header pads by hand).
FORMATS = {
    "gf_event": "<BBHIIIQQQQQQHHHH",
    "gf_py_frame": "<QQIHBB",
    "gf_user_regs": "<QQQ",
    "gf_kernel_record": "<QQIIIIIBBHQ",
}
CONTROL = 0xFFFF
TOGGLE_FROZEN, FLUSH_JOINER, RETIRE_EXITED, OOM_TICK, NCCL_TICK = 0, 1, 2, 3, 4


def read_abi(path):
    """Enum values and integer #defines of the header, by name."""
    text = re.sub(r"/\*.*?\*/", "", open(path).read(), flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    consts = {}

    def value(expr):
        expr = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", expr.strip())
        return eval(expr, {"__builtins__": {}}, dict(consts))  # the header's own arithmetic

    for m in re.finditer(r"#define\s+(GF_\w+)\s+([0-9][0-9xXa-fA-FuUlL]*)\s*$", text, re.M):
        consts[m.group(1)] = value(m.group(2))
    for body in re.findall(r"enum\s+\w+\s*\{(.*?)\}", text, re.S):
        nxt = 0
        for item in body.split(","):
            item = item.strip()
            if not item:
                continue
            name, _, expr = item.partition("=")
            v = value(expr) if expr else nxt
            consts[name.strip()] = v
            nxt = v + 1
    for name, size in re.findall(r"GF_STATIC_ASSERT\(sizeof\(struct (\w+)\) == (\d+)", text):
        if name in FORMATS and struct.calcsize(FORMATS[name]) != int(size):
            sys.exit(f"make_record_seeds.py: struct {name} is {size} bytes in gpuflame_abi.h, "
                     f"{struct.calcsize(FORMATS[name])} here: update FORMATS")
    return consts


A = type("Abi", (), read_abi(ABI_H))
EVENT_SIZE = struct.calcsize(FORMATS["gf_event"])


def event(kind, domain=0, api=0, flags=0, pid=4242, tid=None, ts=1_000_000, addr=0, size=0, arg0=0, arg1=0,
          arg2=0, py_count=0, native_count=0, user_stack_len=0):
    return struct.pack(FORMATS["gf_event"], kind, domain, api, flags, pid, pid if tid is None else tid, ts, addr,
                       size, arg0, arg1, arg2, py_count, native_count, user_stack_len, 0)


def py_frames(depth, stack):
    """|depth| synthetic frames (leaf first), distinct per |stack|, as tests/support/records.h."""
    return b"".join(
        struct.pack(FORMATS["gf_py_frame"], 0x7F0000000000 + i * 4096 + stack * 64, 0, i * 3,
                    (100 + i) & 0xFFFF, A.GF_PYF_FIRST_LINE, 0) for i in range(depth))


def natives(*ips):
    return b"".join(struct.pack("<Q", ip) for ip in ips)


def stack_record(kind, domain, api, py=0, stack=0, native=(), **kw):
    """A record with py Python frames and the native IPs after it."""
    return event(kind, domain, api, py_count=py, native_count=len(native), **kw) + py_frames(py, stack) + \
        natives(*native)


def kernel_record(start, end, corr, name_id, kind=None, graph_id=0):
    return struct.pack(FORMATS["gf_kernel_record"], start, end, corr, name_id, 0, 7, graph_id,
                       A.GF_GPU_KERNEL if kind is None else kind, 0, 0, 0)


def inner(ev, payload=b""):
    """One inner record of a tensor batch: padded to 8 bytes."""
    rec = ev + payload
    return rec + b"\0" * (-len(rec) % 8)


def tensor_batch(pid, inner_records):
    body = b"".join(inner_records)
    return event(A.GF_EV_TENSOR_BATCH, A.GF_DOMAIN_TORCH, A.GF_API_TORCH_REPORT, pid=pid, size=len(body)) + body


def frame(*records):
    """The fuzzer's framing of a run of records (ints are control bytes)."""
    out = b""
    for r in records:
        if isinstance(r, int):
            out += struct.pack("<HB", CONTROL, r)
        else:
            assert len(r) < CONTROL, len(r)
            out += struct.pack("<H", len(r)) + r
    return out


def seeds():
    gpu, torch, cpu = A.GF_DOMAIN_GPU, A.GF_DOMAIN_TORCH, A.GF_DOMAIN_CPU
    s = {}

    # Device-level allocations with Python and native frames, then their frees
    # (one matched, one not), and a second allocation on the same stack.
    s["alloc_free_python"] = frame(
        stack_record(A.GF_EV_ALLOC, gpu, A.GF_API_CUDA_MALLOC, py=3, stack=1, native=(0x401000, 0x402000),
                     addr=0x7000_0000, size=1 << 20),
        stack_record(A.GF_EV_ALLOC, gpu, A.GF_API_CUDA_MALLOC, py=3, stack=1, native=(0x401000, 0x402000),
                     addr=0x7010_0000, size=4096, ts=1_000_100),
        event(A.GF_EV_FREE, gpu, A.GF_API_CUDA_FREE, addr=0x7000_0000, ts=1_000_200),
        event(A.GF_EV_FREE, gpu, A.GF_API_CUDA_FREE, addr=0xdead_0000, ts=1_000_300))
    # Stacks interned in the kernel (struct gf_stack_id): frames with their
    # ID, the ID alone (twice), an ID never sent, then the process exits and
    # the ID is named again; a CPU sample names it too.
    sid = struct.pack("<QQ", 0x1234_5678_9ABC_DEF0, 0x0FED_CBA9_8765_4321)
    s["stack_ids"] = frame(
        event(A.GF_EV_ALLOC, torch, A.GF_API_TORCH_REPORT, flags=A.GF_EVF_STACK_NEW, py_count=5,
              addr=0x7100_0000, size=1 << 20) + py_frames(5, 21) + sid,
        event(A.GF_EV_ALLOC, torch, A.GF_API_TORCH_REPORT, flags=A.GF_EVF_STACK_ID, py_count=5,
              addr=0x7110_0000, size=4096, ts=1_000_100) + sid,
        event(A.GF_EV_CPU_SAMPLE, cpu, 0, flags=A.GF_EVF_STACK_ID, py_count=5, ts=1_000_150) + sid,
        event(A.GF_EV_ALLOC, torch, A.GF_API_TORCH_REPORT, flags=A.GF_EVF_STACK_ID, py_count=5,
              addr=0x7120_0000, size=4096, ts=1_000_200) + struct.pack("<QQ", 1, 2),
        event(A.GF_EV_EXIT, ts=1_000_300),
        event(A.GF_EV_ALLOC, torch, A.GF_API_TORCH_REPORT, flags=A.GF_EVF_STACK_ID, py_count=5,
              addr=0x7130_0000, size=4096, ts=1_000_400) + sid,
        RETIRE_EXITED)
    # A free of something allocated before gpuflame attached.
    s["free"] = frame(event(A.GF_EV_FREE, gpu, A.GF_API_CU_MEM_FREE, addr=0x7000_0000))
    # The caching allocator seen by probes: report hook with totals, a truncated Python stack.
    s["torch_report"] = frame(
        stack_record(A.GF_EV_ALLOC, torch, A.GF_API_TORCH_REPORT, py=A.GF_MAX_PY_FRAMES, stack=2,
                     flags=A.GF_EVF_PY_TRUNCATED, addr=0x7f00_0000, size=512, arg1=512, arg2=2 << 20),
        event(A.GF_EV_FREE, torch, A.GF_API_TORCH_REPORT, addr=0x7f00_0000, arg1=0, arg2=2 << 20, ts=1_000_500))
    # cuMemCreate/cuMemMap: handles, mappings, unmaps.
    s["vmm"] = frame(
        stack_record(A.GF_EV_ALLOC, gpu, A.GF_API_CU_MEM_CREATE, py=1, stack=3, flags=A.GF_EVF_HANDLE,
                     addr=0x55, size=2 << 20),
        event(A.GF_EV_MAP, gpu, A.GF_API_CU_MEM_MAP, addr=0x7000_0000, size=2 << 20, arg0=0x55),
        event(A.GF_EV_UNMAP, gpu, A.GF_API_CU_MEM_UNMAP, addr=0x7000_0000, size=2 << 20),
        event(A.GF_EV_FREE, gpu, A.GF_API_CU_MEM_RELEASE, flags=A.GF_EVF_HANDLE, addr=0x55))
    # CPU samples: Python only, native only, the same stack twice.
    s["cpu_sample"] = frame(
        stack_record(A.GF_EV_CPU_SAMPLE, cpu, 0, py=4, stack=4),
        stack_record(A.GF_EV_CPU_SAMPLE, cpu, 0, py=4, stack=4, ts=1_010_000),
        stack_record(A.GF_EV_CPU_SAMPLE, cpu, 0, native=(0x401234, 0x405678, 0x409abc), tid=4243))
    # A stack copied at the entry of a call (registers and stack bytes for
    # DWARF unwinding), then the allocation that refers to it.
    regs = struct.pack(FORMATS["gf_user_regs"], 0x401000, 0x7ffc_0000_1000, 0x7ffc_0000_1100)
    user_stack = bytes(range(256)) * (A.GF_USER_STACK_BYTES // 256)
    py = py_frames(2, 5) + b"\0" * ((A.GF_MAX_PY_FRAMES - 2) * struct.calcsize(FORMATS["gf_py_frame"]))
    s["call_stack_user_stack"] = frame(
        event(A.GF_EV_CALL_STACK, gpu, A.GF_API_CUDA_MALLOC, flags=A.GF_EVF_USER_STACK, py_count=2,
              user_stack_len=512) + py + regs + user_stack,
        event(A.GF_EV_ALLOC, gpu, A.GF_API_CUDA_MALLOC, flags=A.GF_EVF_STACK_AT_ENTRY, addr=0x7000_0000,
              size=4096))
    # Kernel time: the library's status, a name, a sampled launch, then
    # activity joined to it and a kernel whose launch was not sampled.
    name = b"_Z6matmulPfS_S_i\0"
    s["kernels"] = frame(
        event(A.GF_EV_CUPTI_STATUS, arg0=A.GF_CUPTI_ACTIVE, arg1=A.GF_ABI_VERSION),
        event(A.GF_EV_KERNEL_NAME, arg0=1, size=len(name)) + name,
        stack_record(A.GF_EV_KERNEL_LAUNCH, A.GF_DOMAIN_LAUNCH, 0, py=3, stack=6, arg0=100, arg1=211),
        event(A.GF_EV_KERNEL_BATCH, size=3) + kernel_record(5000, 9000, 100, 1) +
        kernel_record(9000, 9500, 101, 1) + kernel_record(9500, 9800, 100, 0, kind=A.GF_GPU_MEMCPY),
        FLUSH_JOINER)
    # The library's on-spans (GF_GPU_ACTIVITY_WINDOW, duty-cycled activity)
    # beside work and a kind no consumer knows: neither is GPU work.
    s["kernels_activity_window"] = frame(
        event(A.GF_EV_CUPTI_STATUS, arg0=A.GF_CUPTI_ACTIVE, arg1=A.GF_ABI_VERSION),
        event(A.GF_EV_KERNEL_BATCH, size=4) + kernel_record(4000, 20000, 0, 0, kind=A.GF_GPU_ACTIVITY_WINDOW) +
        kernel_record(5000, 9000, 100, 0) + kernel_record(25000, 26000, 101, 0) +
        kernel_record(6000, 7000, 0, 0, kind=7),
        FLUSH_JOINER)
    # Kernel batch alone, at the batch limit.
    s["kernel_batch_full"] = frame(
        event(A.GF_EV_KERNEL_BATCH, size=A.GF_KERNEL_BATCH_MAX) +
        b"".join(kernel_record(i * 10, i * 10 + 5, 1000 + i, 1 + i % 3) for i in range(A.GF_KERNEL_BATCH_MAX)))
    # A library speaking another ABI: its kernel records are ignored.
    s["status_foreign_abi"] = frame(
        event(A.GF_EV_CUPTI_STATUS, arg0=A.GF_CUPTI_ACTIVE, arg1=A.GF_ABI_VERSION + 1),
        event(A.GF_EV_KERNEL_BATCH, size=1) + kernel_record(1, 2, 3, 0),
        event(A.GF_EV_CUPTI_STATUS, arg0=A.GF_CUPTI_OTHER_SUBSCRIBER, arg1=A.GF_ABI_VERSION))
    # In-process tensor events: the hook goes live, a stack, an allocation
    # that refers to it, one without Python frames, one naming an unknown
    # stack, a free; then a probe's tensor event, superseded by the hook.
    torch_api = A.GF_API_TORCH_REPORT
    s["tensor_batch"] = frame(
        tensor_batch(4242, [
            inner(event(A.GF_EV_TENSOR_HOOK, torch, torch_api, pid=77, ts=1_000_000, arg0=A.GF_TENSOR_HOOK_LIVE,
                        arg2=A.GF_ABI_VERSION)),
            inner(event(A.GF_EV_PY_STACK, torch, torch_api, pid=77, arg0=0x1234_5678_9abc_def0, py_count=3),
                  py_frames(3, 7)),
            inner(event(A.GF_EV_ALLOC, torch, torch_api, flags=A.GF_EVF_STACK_REF, pid=77, ts=1_000_100,
                        addr=0x7f00_0000, size=512, arg1=512, arg2=2 << 20), struct.pack("<Q", 0x1234_5678_9abc_def0)),
            inner(event(A.GF_EV_ALLOC, torch, torch_api, flags=A.GF_EVF_STACK_REF, pid=77, ts=1_000_150,
                        addr=0x7f00_1000, size=1024, arg1=1536, arg2=2 << 20), struct.pack("<Q", 0)),
            inner(event(A.GF_EV_ALLOC, torch, torch_api, flags=A.GF_EVF_STACK_REF, pid=77, ts=1_000_160,
                        addr=0x7f00_2000, size=64, arg1=1600, arg2=2 << 20), struct.pack("<Q", 0x99)),
            inner(event(A.GF_EV_FREE, torch, torch_api, pid=77, ts=1_000_200, addr=0x7f00_0000, arg1=1088,
                        arg2=2 << 20)),
        ]),
        stack_record(A.GF_EV_ALLOC, torch, A.GF_API_TORCH_MALLOC, py=1, stack=8, ts=1_000_300, addr=0x7f00_3000,
                     size=256))
    # A hook that could not go live, then events it must not count.
    s["tensor_hook_refused"] = frame(
        tensor_batch(4242, [
            inner(event(A.GF_EV_TENSOR_HOOK, torch, torch_api, pid=77, arg0=A.GF_TENSOR_HOOK_UNSUPPORTED_PYTHON,
                        arg1=A.GF_TENSOR_HOOK_UNSUPPORTED_PYTHON, arg2=A.GF_ABI_VERSION)),
            inner(event(A.GF_EV_FREE, torch, torch_api, pid=77, addr=0x7f00_0000)),
        ]))
    # Backward origin: the hook says it is live, the caller's stack, engine
    # allocations naming it, several calls at once (the count follows), and
    # engine launches naming the caller (arg2) or counting calls (size).
    origin = 0x0bad_cafe_0000_0001
    autograd = A.GF_EVF_STACK_REF | A.GF_EVF_PY_NO_THREAD | A.GF_EVF_AUTOGRAD
    s["autograd"] = frame(
        tensor_batch(4242, [
            inner(event(A.GF_EV_TENSOR_HOOK, torch, torch_api, pid=77, ts=1_000_000, arg0=A.GF_TENSOR_HOOK_LIVE,
                        arg2=A.GF_ABI_VERSION)),
            inner(event(A.GF_EV_AUTOGRAD_HOOK, torch, torch_api, pid=77, arg0=A.GF_AUTOGRAD_HOOK_LIVE)),
            inner(event(A.GF_EV_PY_STACK, torch, torch_api, pid=77, arg0=origin, py_count=4), py_frames(4, 12)),
            inner(event(A.GF_EV_ALLOC, torch, torch_api, flags=autograd, pid=77, tid=78, ts=1_000_100,
                        addr=0x7e00_0000, size=4096, arg1=4096, arg2=2 << 20), struct.pack("<Q", origin)),
            inner(event(A.GF_EV_ALLOC, torch, torch_api, flags=autograd | A.GF_EVF_AUTOGRAD_AMBIGUOUS, pid=77,
                        tid=78, ts=1_000_200, addr=0x7e00_1000, size=512, arg1=4608, arg2=2 << 20),
                  struct.pack("<Q", 2)),
        ]),
        stack_record(A.GF_EV_KERNEL_LAUNCH, A.GF_DOMAIN_LAUNCH, 0, native=(0x401000, 0x402000), arg0=300,
                     arg1=211, arg2=origin, size=1),
        stack_record(A.GF_EV_KERNEL_LAUNCH, A.GF_DOMAIN_LAUNCH, 0, native=(0x401000, 0x402000), arg0=301,
                     arg1=211, size=3),
        event(A.GF_EV_KERNEL_BATCH, size=2) + kernel_record(5000, 9000, 300, 0) + kernel_record(9000, 9500, 301, 0),
        FLUSH_JOINER)
    # A process's life: a library mapped, exec, allocations, finalize, exit,
    # retirement; then the pid reused.
    s["lifecycle"] = frame(
        event(A.GF_EV_LIB_MAPPED, arg0=12345, flags=A.GF_EVF_GATED),
        event(A.GF_EV_EXEC),
        stack_record(A.GF_EV_ALLOC, torch, A.GF_API_TORCH_MALLOC, py=2, stack=9, addr=0x1000, size=100),
        event(A.GF_EV_PY_FINALIZE, ts=2_000_000),
        event(A.GF_EV_FREE, torch, A.GF_API_TORCH_FREE, addr=0x1000, ts=2_000_100),
        event(A.GF_EV_EXIT, ts=2_000_200),
        RETIRE_EXITED,
        stack_record(A.GF_EV_ALLOC, torch, A.GF_API_TORCH_MALLOC, py=2, stack=9, addr=0x1000, size=100,
                     ts=3_000_000))
    # Over the memory budget: new stacks go to the marker, known ones stay.
    s["frozen"] = frame(
        stack_record(A.GF_EV_ALLOC, gpu, A.GF_API_CUDA_MALLOC, py=2, stack=10, addr=0x1000, size=10),
        TOGGLE_FROZEN,
        stack_record(A.GF_EV_ALLOC, gpu, A.GF_API_CUDA_MALLOC, py=2, stack=10, addr=0x2000, size=10),
        stack_record(A.GF_EV_ALLOC, gpu, A.GF_API_CUDA_MALLOC, py=2, stack=11, addr=0x3000, size=10),
        TOGGLE_FROZEN)
    # Out of memory (profiler/forensics/): a device call fails (its stack
    # sent at its entry), the retry after freeing the cache fails too (a
    # stack of its own), then PyTorch's report; an episode a retry on the
    # same thread rescues; one of unknown size given up when its process
    # exits; time passes; the process is retired.
    oom = A.GF_CUDA_OUT_OF_MEMORY
    s["oom"] = frame(
        stack_record(A.GF_EV_ALLOC, gpu, A.GF_API_CUDA_MALLOC, py=2, stack=20, addr=0x7000_0000, size=20 << 20),
        stack_record(A.GF_EV_ALLOC, torch, A.GF_API_TORCH_REPORT, py=2, stack=20, ts=1_000_010, addr=0x7000_0000,
                     size=8 << 20, arg1=8 << 20, arg2=20 << 20),
        event(A.GF_EV_CALL_STACK, gpu, A.GF_API_CUDA_MALLOC, flags=A.GF_EVF_USER_STACK, py_count=2, ts=1_000_020,
              user_stack_len=512) + py + regs + user_stack,
        event(A.GF_EV_ALLOC_FAILED, gpu, A.GF_API_CUDA_MALLOC, flags=A.GF_EVF_STACK_AT_ENTRY, ts=1_000_030,
              size=40 << 20, arg0=oom),
        event(A.GF_EV_FREE, gpu, A.GF_API_CUDA_FREE, addr=0x7000_0000, ts=1_000_035),
        stack_record(A.GF_EV_ALLOC_FAILED, gpu, A.GF_API_CUDA_MALLOC, py=3, stack=21, ts=1_000_040, size=40 << 20,
                     arg0=oom),
        stack_record(A.GF_EV_OOM_REPORT, torch, A.GF_API_TORCH_REPORT, py=3, stack=21, ts=1_000_050,
                     size=40 << 20, arg1=8 << 20, arg2=8 << 20),
        stack_record(A.GF_EV_ALLOC_FAILED, gpu, A.GF_API_CU_MEM_CREATE, py=1, stack=22, ts=1_000_100, size=2 << 20,
                     arg0=oom),
        stack_record(A.GF_EV_ALLOC, gpu, A.GF_API_CU_MEM_CREATE, py=1, stack=22, flags=A.GF_EVF_HANDLE,
                     ts=1_000_110, addr=0x77, size=2 << 20),
        stack_record(A.GF_EV_ALLOC, torch, A.GF_API_TORCH_REPORT, py=2, stack=20, ts=1_000_120, addr=0x7000_1000,
                     size=1 << 20, arg1=9 << 20, arg2=22 << 20),
        stack_record(A.GF_EV_ALLOC_FAILED, gpu, A.GF_API_CU_MEM_ALLOC_PITCH, native=(0x401000,), ts=1_000_200,
                     arg0=oom),
        event(A.GF_EV_EXIT, ts=1_000_300),
        OOM_TICK,
        RETIRE_EXITED)
    # In-process: PyTorch's report in the tensor batch, after the tensors
    # made before it; then one from an engine thread working for a
    # backward() caller, and one while two backward() calls ran.
    s["oom_inprocess"] = frame(
        tensor_batch(4242, [
            inner(event(A.GF_EV_TENSOR_HOOK, torch, torch_api, pid=77, ts=1_000_000, arg0=A.GF_TENSOR_HOOK_LIVE,
                        arg2=A.GF_ABI_VERSION)),
            inner(event(A.GF_EV_PY_STACK, torch, torch_api, pid=77, arg0=origin, py_count=4), py_frames(4, 12)),
            inner(event(A.GF_EV_ALLOC, torch, torch_api, flags=A.GF_EVF_STACK_REF, pid=77, ts=1_000_010,
                        addr=0x7f00_0000, size=8 << 20, arg1=8 << 20, arg2=10 << 20), struct.pack("<Q", origin)),
        ]),
        stack_record(A.GF_EV_ALLOC_FAILED, gpu, A.GF_API_CUDA_MALLOC, py=4, stack=12, ts=1_000_020, size=30 << 20,
                     arg0=oom),
        tensor_batch(4242, [
            inner(event(A.GF_EV_OOM_REPORT, torch, torch_api, flags=A.GF_EVF_STACK_REF, pid=77, ts=1_000_030,
                        size=30 << 20, arg1=8 << 20, arg2=8 << 20), struct.pack("<Q", origin)),
            inner(event(A.GF_EV_OOM_REPORT, torch, torch_api, flags=autograd, pid=77, tid=78, ts=1_000_040,
                        size=4 << 20, arg1=8 << 20, arg2=8 << 20), struct.pack("<Q", origin)),
            inner(event(A.GF_EV_OOM_REPORT, torch, torch_api, flags=autograd | A.GF_EVF_AUTOGRAD_AMBIGUOUS, pid=77,
                        tid=78, ts=1_000_050, size=4 << 20), struct.pack("<Q", 2)),
        ]),
        OOM_TICK)
    # A sampled run's batch: a taken allocation standing for 1 MiB, then the
    # allocator's totals after events that went in no record, on two devices.
    s["tensor_totals"] = frame(
        tensor_batch(4242, [
            inner(event(A.GF_EV_TENSOR_HOOK, torch, torch_api, pid=77, ts=1_000_000, arg0=A.GF_TENSOR_HOOK_LIVE,
                        arg2=A.GF_ABI_VERSION, size=1 << 20)),
            inner(event(A.GF_EV_PY_STACK, torch, torch_api, pid=77, arg0=origin, py_count=4), py_frames(4, 12)),
            inner(event(A.GF_EV_ALLOC, torch, torch_api, flags=A.GF_EVF_STACK_REF | A.GF_EVF_SAMPLED, pid=77,
                        ts=1_000_010, addr=0x7f00_0000, size=64 << 10, arg1=64 << 10, arg2=2 << 20),
                  struct.pack("<QQ", origin, 1 << 20)),
            inner(event(A.GF_EV_TENSOR_TOTALS, torch, torch_api, pid=77, ts=1_000_020, arg0=0, arg1=96 << 10,
                        arg2=2 << 20)),
            inner(event(A.GF_EV_TENSOR_TOTALS, torch, torch_api, pid=77, ts=1_000_030, arg0=1, arg1=4 << 10,
                        arg2=2 << 20)),
        ]))
    # NCCL (bpf/nccl_calls.bpf.h): two ranks join one communicator by its
    # unique ID's hash, all-reduce, then rank 0's send waits past the hang
    # threshold for rank 1's recv; a group of send/recv whose end is stuck
    # when its process exits; a call on a communicator never initialised,
    # with a datatype NCCL lacks and a count that overflows in bytes; a
    # return without its call; an init whose rank is past its size.
    nccl = A.GF_DOMAIN_NCCL
    no_op = A.GF_NCCL_NO_OP
    f32 = 7
    def call(api, pid, ts, comm=0, count=0, dtype=no_op, op=no_op, peer=-1, stream=0, py=2, stack=30, **kw):
        return stack_record(A.GF_EV_NCCL_CALL, nccl, api, py=py, stack=stack, pid=pid, ts=ts, addr=comm, size=count,
                            arg0=(dtype & 0xFFFFFFFF) | (op << 32), arg1=peer & 0xFFFFFFFFFFFFFFFF, arg2=stream, **kw)
    def done(api, pid, ts, comm=0, result=0):
        return event(A.GF_EV_NCCL_DONE, nccl, api, pid=pid, ts=ts, addr=comm, arg0=result)
    init = A.GF_API_NCCL_COMM_INIT_RANK
    s["nccl"] = frame(
        call(A.GF_API_NCCL_GET_UNIQUE_ID, 4241, 900_000, stack=31),
        done(A.GF_API_NCCL_GET_UNIQUE_ID, 4241, 900_010),
        call(init, 4242, 1_000_000, comm=0x2222, count=2, peer=0, stream=0x1111, stack=32),
        call(init, 4243, 1_000_000, comm=0x2222, count=2, peer=1, stream=0x1111, stack=32),
        done(init, 4242, 1_000_100, comm=0xA0),
        done(init, 4243, 1_000_100, comm=0xB0),
        call(A.GF_API_NCCL_ALL_REDUCE, 4242, 1_001_000, comm=0xA0, count=256, dtype=f32, op=0, stream=0x5000),
        call(A.GF_API_NCCL_ALL_REDUCE, 4243, 1_001_000, comm=0xB0, count=256, dtype=f32, op=0, stream=0x5001),
        done(A.GF_API_NCCL_ALL_REDUCE, 4242, 1_001_500),
        done(A.GF_API_NCCL_ALL_REDUCE, 4243, 1_001_500),
        call(A.GF_API_NCCL_SEND, 4242, 1_002_000, comm=0xA0, count=1 << 20, dtype=f32, peer=1, stack=33),
        NCCL_TICK,
        call(A.GF_API_NCCL_RECV, 4243, 3_000_000_000, comm=0xB0, count=1 << 20, dtype=f32, peer=0, stack=34),
        done(A.GF_API_NCCL_SEND, 4242, 3_000_000_100),
        done(A.GF_API_NCCL_RECV, 4243, 3_000_000_100),
        call(A.GF_API_NCCL_GROUP_START, 4243, 3_000_001_000),
        done(A.GF_API_NCCL_GROUP_START, 4243, 3_000_001_000),
        call(A.GF_API_NCCL_SEND, 4243, 3_000_001_000, comm=0xB0, count=8, dtype=f32, peer=0),
        done(A.GF_API_NCCL_SEND, 4243, 3_000_001_000),
        call(A.GF_API_NCCL_RECV, 4243, 3_000_001_000, comm=0xB0, count=8, dtype=f32, peer=0),
        done(A.GF_API_NCCL_RECV, 4243, 3_000_001_000),
        call(A.GF_API_NCCL_GROUP_END, 4243, 3_000_001_000),
        NCCL_TICK,
        event(A.GF_EV_EXIT, pid=4243, ts=6_000_000_000),
        call(A.GF_API_NCCL_SEND, 4244, 6_000_000_000, comm=0xDEAD, count=(1 << 64) - 1, dtype=99, peer=7),
        done(A.GF_API_NCCL_COMM_DESTROY, 4245, 6_000_000_001),
        call(init, 4246, 6_000_000_002, comm=0x3333, count=2, peer=5),
        NCCL_TICK)
    # A GPU-side hang (bpf/cuda_sync.bpf.h in an NCCL process): the send
    # returns at once, the stream's synchronise is entered (with its stack)
    # and stuck past the threshold, then returns; a thread ends inside a
    # send and a synchronise (GF_EV_THREAD_ENDED); a synchronise entry with
    # an API that is not one, and a thread-ended record with every bit set.
    sync = A.GF_DOMAIN_SYNC
    s["nccl_gpu"] = frame(
        call(init, 4252, 1_000_000, comm=0x2222, count=2, peer=0),
        done(init, 4252, 1_000_100, comm=0xC0),
        call(A.GF_API_NCCL_SEND, 4252, 1_002_000, comm=0xC0, count=1 << 20, dtype=f32, peer=1, stream=0x5000),
        done(A.GF_API_NCCL_SEND, 4252, 1_002_010),
        stack_record(A.GF_EV_CUDA_SYNC_ENTER, sync, A.GF_API_CUDA_STREAM_SYNC, py=2, stack=35, pid=4252, ts=1_003_000,
                     addr=0x5000),
        NCCL_TICK,
        stack_record(A.GF_EV_CUDA_SYNC, sync, A.GF_API_CUDA_STREAM_SYNC, py=2, stack=35, pid=4252, ts=4_000_000_000,
                     addr=0x5000, arg0=1_003_000),
        call(A.GF_API_NCCL_SEND, 4252, 4_000_001_000, comm=0xC0, count=8, dtype=f32, peer=1, tid=4253),
        stack_record(A.GF_EV_CUDA_SYNC_ENTER, sync, A.GF_API_CU_STREAM_SYNC, py=2, stack=36, pid=4252, tid=4254,
                     ts=4_000_001_000, addr=0x5000),
        NCCL_TICK,
        event(A.GF_EV_THREAD_ENDED, pid=4252, tid=4253, ts=6_000_000_000, arg0=A.GF_ENDED_NCCL_CALL),
        event(A.GF_EV_THREAD_ENDED, pid=4252, tid=4254, ts=6_000_000_001, arg0=A.GF_ENDED_SYNC_CALL),
        stack_record(A.GF_EV_CUDA_SYNC_ENTER, sync, 7, py=1, stack=37, pid=4252, ts=6_000_000_002),
        event(A.GF_EV_THREAD_ENDED, pid=4252, tid=4255, ts=6_000_000_003, arg0=(1 << 64) - 1),
        NCCL_TICK)
    # Everything small above in one run (mutations splice from here).
    s["all"] = b"".join(v for k, v in sorted(s.items()) if k not in ("call_stack_user_stack", "kernel_batch_full"))
    return s


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus", "record")
    os.makedirs(out, exist_ok=True)
    made = seeds()
    for name in os.listdir(out):
        if not name.startswith("crash-") and name not in made:
            os.remove(os.path.join(out, name))  # a seed this script no longer writes
    for name, data in sorted(made.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"make_record_seeds.py: {len(made)} seeds in {out}")


if __name__ == "__main__":
    main()
