#!/usr/bin/env python3
"""Writes the seeds of python_code_fuzzer and python_linetable_fuzzer from
the interpreter running it: real code objects, their strings and line tables,
copied out of this process's own memory (ctypes.string_at at id()), as the
agent reads them out of a profiled process.

    for v in 3.10 3.11 3.12 3.13; do pythonV tests/fuzz/make_python_seeds.py; done

Framing (the harnesses' headers say the same):
  python_code:      u8 minor | u32 instr | region*, region := u64 addr | u32 len | bytes;
                    the code object is the first region
  python_linetable: u8 minor | i32 first_line | co_linetable bytes
"""
import ctypes
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MINOR = sys.version_info.minor


class Model:
    def forward(self, x):
        y = x * 2
        for i in range(3):
            y += i
        return y


def outer():
    def inner(a, b=1):
        return [a + b for _ in range(2)]
    return inner


def region(obj_addr, size):
    return struct.pack("<QI", obj_addr, size) + ctypes.string_at(obj_addr, size)


def code_seed(code):
    regions = [region(id(code), sys.getsizeof(code))]
    for s in (code.co_filename, code.co_name, getattr(code, "co_qualname", code.co_name)):
        regions.append(region(id(s), sys.getsizeof(s)))
    table = code.co_linetable
    regions.append(region(id(table), sys.getsizeof(table)))
    if code.co_varnames:
        regions.append(region(id(code.co_varnames), sys.getsizeof(code.co_varnames)))
        regions.append(region(id(code.co_varnames[0]), sys.getsizeof(code.co_varnames[0])))
    # The code object's type and its tp_name (a C string), for TypeName.
    t = id(type(code))
    regions.append(region(t, 32))
    tp_name = struct.unpack("<Q", ctypes.string_at(t + 24, 8))[0]
    regions.append(region(tp_name, 32))
    instr = 4
    return bytes([MINOR]) + struct.pack("<I", instr) + b"".join(regions)


def write(kind, name, data):
    d = os.path.join(HERE, "corpus", kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"py3{MINOR}-{name}"), "wb") as f:
        f.write(data)


# Strings of every kind: a UCS-2 name (名前) in a file named in UCS-4.
unicode_ns = {}
exec(compile("def 名前(größe):\n    return größe\n", "\U0001F600.py", "exec"), unicode_ns)

codes = {
    "unicode": unicode_ns["名前"].__code__,
    "method": Model.forward.__code__,
    "closure": outer().__code__,
    "module-helper": write.__code__,
}
for name, code in codes.items():
    write("python_code", name, code_seed(code))
    write("python_linetable", name, bytes([MINOR]) + struct.pack("<i", code.co_firstlineno) + code.co_linetable)
