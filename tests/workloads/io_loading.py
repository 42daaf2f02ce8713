"""Workload for the timeline's model-loading I/O spans: on a thread named
gf-loader, opens the weights file argv[1] (argv[2] bytes), reads it whole in
one read(), reads 100,000 bytes at offset 4096 with pread64, reads 100 bytes
(under the default filter: counted, not a span), maps it whole, and prints
its pid, the thread's id and CLOCK_MONOTONIC before and after. The thread
lives 0.5 s more, so that gpuflame reads its name while it is there. No
CUDA: the I/O is what is tested."""
import ctypes
import mmap
import os
import sys
import threading
import time

path, size = sys.argv[1], int(sys.argv[2])


def load():
    ctypes.CDLL(None).prctl(15, b"gf-loader", 0, 0, 0)  # PR_SET_NAME
    begin = time.monotonic_ns()
    fd = os.open(path, os.O_RDONLY)
    data = os.read(fd, size + 4096)  # one read() of a regular file: all of it
    assert len(data) == size, len(data)
    assert len(os.pread(fd, 100_000, 4096)) == 100_000
    assert len(os.pread(fd, 100, 0)) == 100
    m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    m.close()
    os.close(fd)
    end = time.monotonic_ns()
    print(f"io_loading pid={os.getpid()} tid={threading.get_native_id()} begin={begin} end={end}", flush=True)
    time.sleep(0.5)


t = threading.Thread(target=load)
t.start()
t.join()
