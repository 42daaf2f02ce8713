#!/usr/bin/env python3
"""Seeds for diff_fuzzer: pairs of real inputs of `gpuflame diff`, framed as
the target reads them (BASE's length, 4 bytes little endian, BASE, NEW).

  make_diff_seeds.py OUT_DIR NAME BASE_FILE NEW_FILE [NAME BASE NEW ...]

The corpus (tests/fuzz/corpus/diff/) was made from two record runs of
tests/workloads/diff_runs.py (base, new: torch_memory, gpu_memory,
process_cpu), a memory profile against a CPU one, spool files of
tests/fuzz/corpus/spool/, and an older gpuflame's gpu_memory (no peak_*,
unused_*: pprof_symbolize/othersig-gpu_memory.pb.gz) against a newer one's
(older-vs-newer-types: diffed in the types both have).
"""
import os
import struct
import sys


def main(argv):
    if len(argv) < 5 or (len(argv) - 2) % 3:
        sys.exit(__doc__)
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    for i in range(2, len(argv), 3):
        name, base, new = argv[i : i + 3]
        with open(base, "rb") as f:
            b = f.read()
        with open(new, "rb") as f:
            n = f.read()
        with open(os.path.join(out, name), "wb") as f:
            f.write(struct.pack("<I", len(b)) + b + n)


if __name__ == "__main__":
    main(sys.argv)
