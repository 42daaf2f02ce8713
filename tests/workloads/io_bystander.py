"""A process gpuflame does not follow: reads the file argv[1] whole, again
and again, for argv[2] seconds. None of its reads may reach the trace."""
import sys
import time

deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    with open(sys.argv[1], "rb") as f:
        f.read()
    time.sleep(0.01)
