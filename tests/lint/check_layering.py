#!/usr/bin/env python3
"""Fails when an #include or a CMake dependency runs against the data flow.

The build already refuses a backward include (each library sees only the
headers of the libraries it names, cmake/GpuflameLibrary.cmake); this check
also refuses the shortcut of naming a later stage in a CMakeLists.txt DEPS
to make such an include compile. The order below is ARCHITECTURE.md's: a
folder may depend only on folders listed before it.
"""
import os
import re
import sys

LAYERS = [
    "base",
    "logging",
    "bpf",
    "inspect",
    "symbolizer",
    "profiler/probes",
    "profiler/devices",
    "profiler/process",
    "profiler/unwind",
    "profiler/resolve",
    "profiler/aggregate",
    "profiler/forensics",
    "profiler/timeline",
    "profiler/utilization",
    "profiler/collectives",
    "profiler/pipeline",
    "exporters/proto",
    "exporters/pprof",
    "exporters/files",
    "exporters/trace",
    "exporters/pyroscope",
    "exporters/diff",
    "agent",
    "app",
]
# The injection library runs inside the workload: it may use the ABI header
# and nothing else of ours.
SEPARATE = {"cupti": {"bpf", "inprocess"}, "inprocess": {"bpf", "inspect"}}
SOURCE_EXT = (".h", ".cc", ".c")


def folder_of(path):
    """The layer a repository path belongs to (longest matching prefix)."""
    best = None
    for layer in LAYERS + list(SEPARATE):
        if path == layer or path.startswith(layer + "/"):
            if best is None or len(layer) > len(best):
                best = layer
    return best


def cmake_deps(root):
    """library target -> (folder, [gf_* dependency targets])."""
    libs = {}
    for layer in LAYERS + list(SEPARATE):
        path = os.path.join(root, layer, "CMakeLists.txt")
        if not os.path.exists(path):
            continue
        text = open(path).read()
        for m in re.finditer(r"gpuflame_library\((\w+)(.*?)\)\s*$", text, re.S | re.M):
            deps = re.search(r"DEPS\s+([^\n]*(?:\n\s+(?!EXTERNAL|SOURCES)[^\n]*)*)", m.group(2))
            names = re.findall(r"\bgf_\w+", deps.group(1)) if deps else []
            libs[m.group(1)] = (layer, names)
        for m in re.finditer(r"add_library\((gf_\w+)", text):
            libs.setdefault(m.group(1), (layer, []))
    return libs


def main(root):
    errors = []
    order = {layer: i for i, layer in enumerate(LAYERS)}
    libs = cmake_deps(root)
    folder_of_lib = {name: layer for name, (layer, _) in libs.items()}
    for name, (layer, deps) in sorted(libs.items()):
        for dep in deps:
            target = folder_of_lib.get(dep)
            if target is None or target == layer or layer in SEPARATE:
                continue
            if order[target] > order[layer]:
                errors.append(f"{layer}/CMakeLists.txt: {name} depends on {dep} ({target}), a later stage")
    for layer in LAYERS + list(SEPARATE):
        for dirpath, _, files in os.walk(os.path.join(root, layer)):
            for f in files:
                if not f.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                here = folder_of(rel)
                if here != layer:
                    continue  # a nested folder that is its own layer
                for n, line in enumerate(open(path, errors="replace"), 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    if not m or not os.path.exists(os.path.join(root, m.group(1))):
                        continue  # generated or third-party header
                    there = folder_of(m.group(1))
                    if there is None or there == here:
                        continue
                    if here in SEPARATE:
                        ok = there in SEPARATE[here]
                    else:
                        ok = there in order and order[there] < order[here]
                    if not ok:
                        errors.append(f"{rel}:{n}: includes {m.group(1)}: {there} comes after {here} in the data flow")
    for e in errors:
        print(e)
    print(f"layering: {len(libs)} libraries, {len(errors)} violations")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")))
