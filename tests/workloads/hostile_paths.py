"""Workload: a hostile process (no GPU, no CUDA calls). It maps a private
copy of the simulated CUDA runtime (a test fixture) executable, as ld.so
would, then makes the path it mapped name a FIFO, so that a profiler which
opens that path for reading waits for a writer forever:

  swap   exchanges the library's directory with one holding a FIFO of the
         same name (renameat2 RENAME_EXCHANGE), then keeps exchanging them;
  mount  mounts a tmpfs holding such a FIFO over the directory, in a mount
         namespace of its own (root, or a user namespace, may do that);
  fuse   maps the library from a FUSE file system it serves itself (in a
         mount namespace of its own; fuse_server.py), then stops answering:
         whoever opens, stats or walks a path into it waits for good.

argv: mode, work directory. Prints "ready" once the path names the FIFO and
holds the mapping until <work>/stop exists (at most 120 s)."""
import ctypes
import mmap
import os
import shutil
import sys
import threading
import time

mode, work = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
name = "libcudart.so.13"
lib_dir, fifo_dir = os.path.join(work, "lib"), os.path.join(work, "fifo")
os.makedirs(lib_dir)
source = os.path.join(os.environ["GPUFLAME_SIM_LIB_DIR"], name)


def map_library(path):
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_EXEC)


if mode != "fuse":
    shutil.copy(source, lib_dir)
    mapping = map_library(os.path.join(lib_dir, name))


def check(rc, what):
    if rc != 0:
        raise OSError(ctypes.get_errno(), what)


if mode == "swap":
    os.makedirs(fifo_dir)
    os.mkfifo(os.path.join(fifo_dir, name))
    AT_FDCWD, RENAME_EXCHANGE = -100, 2

    def exchange():
        check(libc.renameat2(AT_FDCWD, lib_dir.encode(), AT_FDCWD, fifo_dir.encode(), RENAME_EXCHANGE), "renameat2")

    exchange()  # <work>/lib/libcudart.so.13 is the FIFO now

    def keep_swapping():
        while True:
            exchange()
            exchange()
            time.sleep(0.0005)

    threading.Thread(target=keep_swapping, daemon=True).start()
elif mode in ("mount", "fuse"):
    CLONE_NEWNS, MS_REC, MS_PRIVATE = 0x20000, 0x4000, 0x40000
    check(libc.unshare(CLONE_NEWNS), "unshare")
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    if mode == "mount":
        check(libc.mount(b"tmpfs", lib_dir.encode(), b"tmpfs", 0, None), "mount tmpfs")
        os.mkfifo(os.path.join(lib_dir, name))
    else:
        import fuse_server

        fs = fuse_server.OneFileFs(lib_dir, name, source)
        mapping = map_library(os.path.join(lib_dir, name))  # the file closed (flushed) while the server answers
        fs.hang()
else:
    sys.exit("mode: swap, mount or fuse")

print("ready", flush=True)
deadline = time.monotonic() + 120
while not os.path.exists(os.path.join(work, "stop")) and time.monotonic() < deadline:
    time.sleep(0.05)
if mode == "fuse":
    fs.close()  # before exit closes the mapping's own descriptor (a flush nobody would answer)
