#!/usr/bin/env bash
# Fails if a raw close() appears outside the descriptor owners. Every fd is
# held by base::ScopedFd (base/scoped_fd.h), so it is closed exactly once, on
# every path, and never after it was moved away or released; a bare close()
# elsewhere is a leak or a double close waiting for an error path.
#
# Usage: no_raw_close.sh [SOURCE_ROOT]   (default: the repository holding this script)
#
# Matched: `close(` and `::close(` as a call, outside `//` comments. Not
# matched: fclose, pclose, closedir, and methods (`.close(`, `->close(`).
set -euo pipefail

root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"

# The owners. cupti/ links nothing of ours: if it ever opens descriptors it
# gets its own minimal owner, to be listed here.
# bench/io_syscall_cost.c: a standalone C program (no base/) timing the
# openat and close syscalls themselves, in a loop.
allowed=(base/scoped_fd.cc bench/io_syscall_cost.c)
dirs=(agent app base bench cupti exporters inspect profiler symbolizer tests)

pattern='^(?:(?!//).)*?(?<![\w.>])(?:::)?close\s*\('

# The pattern itself is checked first, so that a broken one cannot pass silently.
printf '%s\n' '  close(fd);' '  if (fd >= 0) ::close(fd);' | grep -cP "$pattern" | grep -qx 2 ||
  { echo "no_raw_close.sh: the pattern misses raw close() calls" >&2; exit 2; }
if printf '%s\n' 'fclose(f);' 'closedir(d);' 'out.close();' 'p->close();' '// close(fd) here' |
  grep -qP "$pattern"; then
  echo "no_raw_close.sh: the pattern matches what is not a raw close()" >&2
  exit 2
fi

existing=()
for d in "${dirs[@]}"; do [[ -d $d ]] && existing+=("$d"); done
exclude=()
for f in "${allowed[@]}"; do exclude+=(-e "^$f:"); done

hits=$(grep -rnP --include='*.cc' --include='*.h' --include='*.c' --include='*.cpp' \
         --exclude-dir=node_modules "$pattern" "${existing[@]}" | grep -v "${exclude[@]}" || true)
if [[ -n $hits ]]; then
  echo "Raw close() outside the fd owners; hold the descriptor in a base::ScopedFd"
  echo "(reset() or scope exit closes it, release() hands it to libdw/libbpf/fdopen):"
  echo "$hits"
  exit 1
fi
echo "no raw close() outside ${allowed[*]}"
