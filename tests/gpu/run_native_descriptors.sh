#!/usr/bin/env bash
# The native unwinder's descriptors on a real PyTorch process (session 42):
# `record --native-stacks all` on the launch-bound GPT (tests/gpu/train_bench.py),
# so that tensor events too get DWARF-unwound native stacks and some go
# through libdwfl; gpuflame's open descriptors are counted every 0.5 s while
# it runs (most, and how many name a file the workload maps), then its
# summary's unwinder counters. With the bundle from scripts/gpu-bundle.sh in
# .carry/; output under $OUT.   STEPS (300)
GF_OUT_SUFFIX=/native-descriptors . "$(dirname "$0")/common.sh"
"$bundle/gpuflame" record -q --native-stacks all -o "$out/rec" -- \
    "$py" "$here/train_bench.py" --steps "${STEPS:-300}" >"$out/record.log" 2>&1 &
gf=$!
most=0 most_files=0 looks=0
while kill -0 $gf 2>/dev/null; do
  n=$(ls /proc/$gf/fd 2>/dev/null | wc -l)
  files=$(for f in /proc/$gf/fd/*; do readlink "$f"; done 2>/dev/null | grep -cE '\.so(\.[0-9]+)*$|python3')
  [ "$n" -gt "$most" ] && most=$n
  [ "$files" -gt "$most_files" ] && most_files=$files
  looks=$((looks + 1))
  sleep 0.5
done
wait $gf || { status=1; tail -5 "$out/record.log"; }
echo "gpuflame's descriptors, most in $looks looks: $most, of them to shared objects or python: $most_files"
python3 - "$out/rec/summary.json" <<'PY' || status=1
import json, sys
s = json.load(open(sys.argv[1]))
print("symbols:", json.dumps({k: v for k, v in s.get("symbols", {}).items() if not isinstance(v, (dict, list))}))
PY
tail -3 "$out/record.log"
exit $status
