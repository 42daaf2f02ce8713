"""Workload: two NCCL ranks (separate processes) on the simulated libnccl
(test fixture: no GPU, no data moved; tests/fixtures/cuda_sim/README.md),
calling it from class methods through ctypes, as torch.distributed's NCCL
backend does from Python. A peer stopped with SIGSTOP leaves the other rank
stuck in its call, as in a real job.

  nccl_ranks.py MODE STOP_S        the launcher: makes the unique ID
                                   (ncclGetUniqueId), starts ranks 0 and 1,
                                   and stops rank 1 for STOP_S seconds where
                                   MODE says; prints the ID's hex and each
                                   rank's pid
  nccl_ranks.py rank R IDHEX MODE  one rank

Each rank: a rendezvous with the other (files), ncclCommInitRank(2 ranks), then
STEPS steps of Trainer > step:
an all-reduce of 1 MiB of float32 (Comm > all_reduce), a broadcast of
256 KiB from rank 0 (Comm > broadcast), and an exchange (Comm > exchange):
rank 0 ncclSend 4 MiB of float32 to rank 1, rank 1 ncclRecv them from rank 0.

  send        before its last ncclRecv, rank 1 is stopped: rank 0 sits in
              ncclSend (Trainer > step > Comm > exchange > send) for STOP_S
  group       the exchange both ways in a group (Comm > exchange_grouped:
              ncclGroupStart, ncclSend and ncclRecv of 4 MiB to and from the
              other rank, ncclGroupEnd); before its last group rank 1 is
              stopped: rank 0 sits in ncclGroupEnd for STOP_S
  broadcast   before its last broadcast, rank 1 is stopped: rank 0 sits in
              ncclBroadcast (Comm > broadcast) for STOP_S
  init        before its ncclCommInitRank, rank 1 is stopped: rank 0 sits
              in ncclCommInitRank (Comm > __init__) for STOP_S, as a job
              whose peer never started
  kill        as send, and then, as a hung job's controller (or NCCL's
              watchdog) would, the launcher kills both ranks with SIGKILL:
              rank 0 dies inside its ncclSend
  straggler   no stop; STRAGGLER_STEPS steps, in each of which rank 1
              first spends STRAGGLER_S of CPU in DataLoader > __next__
              (rank 0's loader returns at once), so rank 0 waits for it in
              every all-reduce: rank 1 is the straggler
  gpu         as send, on a simulated GPU (GF_SIM_NCCL_GPU=1: NCCL calls
              return once enqueued) and each step ends with
              cudaStreamSynchronize on the rank's stream (Trainer > step >
              Comm > synchronize): rank 0's last ncclSend returns at once
              and it sits in that synchronise call for STOP_S
  thread      as send, but rank 0's last ncclSend runs on a thread of its
              own (Comm > send_on_thread), which ends inside the call 2 s
              into its wait (GF_SIM_NCCL_END_THREAD_S=2: pthread_exit, as a
              cancelled thread); rank 0 lives on and ends normally (pass a
              STOP_S over 2)
  none        no stop

  nccl_ranks.py loop SECONDS PIDFILE
                                   one process, no communicator, found
                                   running: writes PIDFILE after its first
                                   calls, then for SECONDS calls
                                   ncclGroupStart and ncclGroupEnd and
                                   cudaStreamSynchronize back to back
                                   (Looper > step > Looper > group), as fast
                                   as it can; prints how many of each
"""
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

STEPS = 3
STRAGGLER_STEPS = 10
STRAGGLER_S = 0.05
FLOAT32 = 7  # ncclFloat32
SUM = 0      # ncclSum
MiB = 1 << 20


def _sim_dir():
    d = os.environ.get("GPUFLAME_SIM_LIB_DIR")
    if d:
        return d
    for p in sys.path:
        if os.path.exists(os.path.join(p, "libnccl.so.2")):
            return p
    raise SystemExit("nccl_ranks.py: no simulated libnccl.so.2 (set GPUFLAME_SIM_LIB_DIR)")


_DIR = _sim_dir()
nccl = ctypes.CDLL(os.path.join(_DIR, "libnccl.so.2"))
cudart = ctypes.CDLL(os.path.join(_DIR, "libcudart.so.13"))


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


for f in ("ncclAllReduce", "ncclBroadcast", "ncclSend", "ncclRecv", "ncclCommInitRank", "ncclCommDestroy",
          "ncclGetUniqueId", "ncclGroupStart", "ncclGroupEnd"):
    getattr(nccl, f).restype = ctypes.c_int
nccl.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId, ctypes.c_int]
nccl.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                               ctypes.c_void_p, ctypes.c_void_p]
nccl.ncclBroadcast.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                               ctypes.c_void_p, ctypes.c_void_p]
nccl.ncclSend.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                          ctypes.c_void_p]
nccl.ncclRecv.argtypes = nccl.ncclSend.argtypes
nccl.ncclCommDestroy.argtypes = [ctypes.c_void_p]
cudart.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]


def check(what, r):
    if r != 0:
        raise SystemExit(f"nccl_ranks.py: {what} returned {r}")


def device_buffer(nbytes):
    p = ctypes.c_void_p()
    check("cudaMalloc", cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(nbytes)))
    return p


def rendezvous(rank, idhex):
    """Both ranks here before either calls NCCL, as torchrun's ranks meet at
    their store first: how long each took to start (imports, gpuflame's
    gates holding it while its probes are attached, a loaded machine) is
    not a wait inside NCCL. Files in the simulated NCCL's directory,
    bounded to 60 s."""
    d = os.environ.get("GF_SIM_NCCL_DIR") or "/tmp"
    mine, theirs = (os.path.join(d, f"rendezvous-{idhex[:16]}-{r}") for r in (rank, 1 - rank))
    open(mine, "w").close()
    for _ in range(6000):
        if os.path.exists(theirs):
            return
        time.sleep(0.01)
    raise SystemExit(f"nccl_ranks.py: rank {1 - rank} never came to the rendezvous")


class Comm:
    def __init__(self, rank, uid, mode):
        self.rank = rank
        if mode == "init" and rank == 1:
            wait_for_launcher()
        self.comm = ctypes.c_void_p()
        # A stream of our own, as a ProcessGroupNCCL's: a fixed fake handle.
        self.stream = ctypes.c_void_p(0x5000 + rank)
        check("ncclCommInitRank", nccl.ncclCommInitRank(ctypes.byref(self.comm), 2, uid, rank))
        self.grad = device_buffer(MiB)
        self.weights = device_buffer(256 * 1024)
        self.payload = device_buffer(4 * MiB)

    def all_reduce(self):
        check("ncclAllReduce", nccl.ncclAllReduce(self.grad, self.grad, MiB // 4, FLOAT32, SUM, self.comm,
                                                  self.stream))

    def broadcast(self):
        check("ncclBroadcast", nccl.ncclBroadcast(self.weights, self.weights, 256 * 1024 // 4, FLOAT32, 0,
                                                  self.comm, self.stream))

    def send(self, peer=1):
        check("ncclSend", nccl.ncclSend(self.payload, MiB, FLOAT32, peer, self.comm, self.stream))

    def recv(self, peer=0):
        check("ncclRecv", nccl.ncclRecv(self.payload, MiB, FLOAT32, peer, self.comm, self.stream))

    def synchronize(self):
        check("cudaStreamSynchronize", cudart.cudaStreamSynchronize(self.stream))

    def send_on_thread(self):
        """The send on a thread that the simulated NCCL ends inside the call;
        waits (bounded) until the kernel has seen the thread go."""
        started = []
        t = threading.Thread(target=lambda: (started.append(threading.get_native_id()), self.send()), daemon=True)
        t.start()
        for _ in range(3000):
            if started and not os.path.exists(f"/proc/self/task/{started[0]}"):
                print(f"rank 0 thread {started[0]} ended inside ncclSend", flush=True)
                return
            time.sleep(0.01)
        raise SystemExit("nccl_ranks.py: the send's thread did not end")

    def exchange_grouped(self, last):
        if last and self.rank == 1:
            wait_for_launcher()
        peer = 1 - self.rank
        check("ncclGroupStart", nccl.ncclGroupStart())
        self.send(peer)
        self.recv(peer)
        check("ncclGroupEnd", nccl.ncclGroupEnd())

    def exchange(self, last, mode):
        if mode == "group":
            self.exchange_grouped(last)
        elif self.rank == 0:
            if last and mode == "thread":
                self.send_on_thread()
            else:
                self.send()
        else:
            if last and mode in ("send", "kill", "gpu", "thread"):
                wait_for_launcher()
            self.recv()

    def close(self):
        check("ncclCommDestroy", nccl.ncclCommDestroy(self.comm))


def wait_for_launcher():
    """Tells the launcher we are about to call, then waits for its go (sent
    while we are stopped), so the stop comes before our call, never after."""
    print("ready", flush=True)
    sys.stdin.readline()


class DataLoader:
    def __init__(self, seconds):
        self.seconds = seconds

    def __next__(self):
        # CPU-bound preprocessing: on the CPU, where the samples see it.
        end = time.perf_counter() + self.seconds
        x = 0
        while time.perf_counter() < end:
            x += 1
        return x


class Trainer:
    def __init__(self, comm, mode):
        self.comm = comm
        self.mode = mode
        slow = mode == "straggler" and comm.rank == 1
        self.loader = DataLoader(STRAGGLER_S if slow else 0)

    def step(self, last):
        next(self.loader)
        self.comm.all_reduce()
        if last and self.mode == "broadcast" and self.comm.rank == 1:
            wait_for_launcher()
        self.comm.broadcast()
        self.comm.exchange(last, self.mode)
        if self.mode == "gpu":
            self.comm.synchronize()


def run_rank(rank, idhex, mode):
    uid = UniqueId()
    # All 128 bytes: assigning to a c_char array stops at its first NUL.
    ctypes.memmove(ctypes.byref(uid), bytes.fromhex(idhex), ctypes.sizeof(uid))
    rendezvous(rank, idhex)
    comm = Comm(rank, uid, mode)
    trainer = Trainer(comm, mode)
    steps = STRAGGLER_STEPS if mode == "straggler" else STEPS
    for i in range(steps):
        trainer.step(i == steps - 1)
    comm.close()
    print(f"rank {rank} done", flush=True)
    if mode == "thread":
        os._exit(0)  # the ended thread's Python state is left behind: no interpreter teardown


def launch(mode, stop_s):
    uid = UniqueId()
    check("ncclGetUniqueId", nccl.ncclGetUniqueId(ctypes.byref(uid)))
    idhex = bytes(uid).hex()  # the struct's bytes: .internal would stop at the first NUL
    print(f"unique id {idhex}", flush=True)
    env = dict(os.environ)
    if mode == "gpu":
        env["GF_SIM_NCCL_GPU"] = "1"
    ranks = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "rank", str(r), idhex, mode],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=dict(env, GF_SIM_NCCL_END_THREAD_S="2") if mode == "thread" and r == 0 else env)
             for r in (0, 1)]
    for r, p in enumerate(ranks):
        print(f"rank {r} pid {p.pid}", flush=True)
    if mode not in ("none", "straggler"):
        line = ranks[1].stdout.readline()
        if line.strip() != "ready":
            raise SystemExit(f"nccl_ranks.py: rank 1 said {line!r}")
        os.kill(ranks[1].pid, signal.SIGSTOP)
        ranks[1].stdin.write("go\n")
        ranks[1].stdin.flush()
        print(f"stopped rank 1 for {stop_s} s", flush=True)
        time.sleep(stop_s)
        if mode == "kill":
            for p in ranks:
                p.kill()
        os.kill(ranks[1].pid, signal.SIGCONT)
    status = 0
    for p in ranks:
        out, _ = p.communicate(timeout=120)
        sys.stdout.write(out)
        killed = mode == "kill" and p.returncode == -signal.SIGKILL
        status |= 0 if killed else p.returncode
    return status


class Looper:
    def group(self):
        check("ncclGroupStart", nccl.ncclGroupStart())
        check("ncclGroupEnd", nccl.ncclGroupEnd())
        check("cudaStreamSynchronize", cudart.cudaStreamSynchronize(None))

    def step(self):
        for _ in range(100):
            self.group()


def loop(seconds, pidfile):
    looper = Looper()
    looper.step()
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(pidfile + ".tmp", pidfile)
    steps = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        looper.step()
        steps += 1
    print(f"loop: {(steps + 1) * 100} of each call", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "rank":
        run_rank(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "loop":
        loop(float(sys.argv[2]), sys.argv[3])
    else:
        sys.exit(launch(sys.argv[1], float(sys.argv[2])))
