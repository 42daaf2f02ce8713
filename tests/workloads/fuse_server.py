"""A FUSE file system of one file, served from this process over /dev/fuse
(no libfuse), that can stop answering: the hostile server of
hostile_paths.py's "fuse" mode. Root only (mount(2) with fd=...).

Serves the root directory and one regular file NAME whose bytes are those
of SOURCE; entries and attributes are never cached (valid 0 s), so every
path walk and stat asks the server again. After hang(), requests are read
and never answered: whoever touches the file system waits, as on a FUSE
server that hangs, until close() (or this process's end) aborts it."""
import ctypes
import os
import struct
import threading

FUSE_LOOKUP, FUSE_GETATTR, FUSE_OPEN, FUSE_READ, FUSE_RELEASE = 1, 3, 14, 15, 18
FUSE_FLUSH, FUSE_INIT, FUSE_OPENDIR, FUSE_RELEASEDIR, FUSE_DESTROY = 25, 26, 27, 29, 38
ENOENT, ENOSYS = 2, 38
IN_HEADER = struct.Struct("<IIQQIIII")  # len opcode unique nodeid uid gid pid padding
OUT_HEADER = struct.Struct("<IiQ")  # len error unique
ROOT, FILE = 1, 2


class OneFileFs:
    def __init__(self, mountpoint, name, source):
        with open(source, "rb") as f:
            self.data = f.read()
        self.name = name.encode()
        self.answering = True
        self.fd = os.open("/dev/fuse", os.O_RDWR)
        libc = ctypes.CDLL(None, use_errno=True)
        opts = "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other" % self.fd
        MS_NOSUID, MS_NODEV = 2, 4
        if libc.mount(b"gpuflametest", mountpoint.encode(), b"fuse.gpuflametest", MS_NOSUID | MS_NODEV,
                      opts.encode()) != 0:
            raise OSError(ctypes.get_errno(), "mount fuse")
        threading.Thread(target=self._serve, daemon=True).start()

    def hang(self):
        self.answering = False

    def close(self):
        """Aborts the connection: every request waiting, ours too, fails at
        once. Call before anything of this process closes a file of the
        mount (a close asks the server to flush, and nobody would answer)."""
        os.close(self.fd)

    def _attr(self, node):
        if node == ROOT:
            mode, size, nlink = 0o40755, 0, 2
        else:
            mode, size, nlink = 0o100755, len(self.data), 1
        # ino size blocks atime mtime ctime atimensec mtimensec ctimensec mode nlink uid gid rdev blksize flags
        return struct.pack("<QQQQQQIIIIIIIIII", node, size, (size + 511) // 512, 0, 0, 0, 0, 0, 0, mode, nlink,
                           0, 0, 0, 4096, 0)

    def _reply(self, unique, payload=b"", error=0):
        os.write(self.fd, OUT_HEADER.pack(OUT_HEADER.size + len(payload), -error, unique) + payload)

    def _serve(self):
        while True:
            try:
                request = os.read(self.fd, 1 << 20)
            except OSError:
                return  # unmounted
            length, opcode, unique, node, _, _, _, _ = IN_HEADER.unpack_from(request)
            body = request[IN_HEADER.size:length]
            if not self.answering:
                continue  # read, never answered
            if opcode == FUSE_INIT:
                major, minor = struct.unpack_from("<II", body)
                # major minor max_readahead flags max_background congestion max_write time_gran max_pages
                # map_alignment flags2 unused[7]
                out = struct.pack("<IIIIHHIIHHI", 7, min(minor, 31), 1 << 16, 0, 16, 12, 1 << 16, 1, 16, 0, 0)
                self._reply(unique, out + bytes(28))
            elif opcode == FUSE_LOOKUP:
                if node == ROOT and body.rstrip(b"\0") == self.name:
                    # nodeid generation entry_valid attr_valid entry_valid_nsec attr_valid_nsec, attr
                    self._reply(unique, struct.pack("<QQQQII", FILE, 1, 0, 0, 0, 0) + self._attr(FILE))
                else:
                    self._reply(unique, error=ENOENT)
            elif opcode == FUSE_GETATTR:
                self._reply(unique, struct.pack("<QII", 0, 0, 0) + self._attr(node))
            elif opcode in (FUSE_OPEN, FUSE_OPENDIR):
                self._reply(unique, struct.pack("<QII", 1, 0, 0))  # fh open_flags padding
            elif opcode == FUSE_READ:
                offset, size = struct.unpack_from("<QI", body, 8)  # after fh: offset, size
                self._reply(unique, self.data[offset:offset + size])
            elif opcode in (FUSE_RELEASE, FUSE_RELEASEDIR, FUSE_FLUSH):
                self._reply(unique)
            elif opcode == FUSE_DESTROY:
                return
            else:
                self._reply(unique, error=ENOSYS)
