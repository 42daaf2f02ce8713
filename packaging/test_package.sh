#!/usr/bin/env bash
# Builds the Debian package from a build tree (CPack: from gpuflame and
# libgpuflame_cupti.so as built, nothing rebuilt), then checks it as an
# installer would meet it: its file list and control fields, its contents
# unpacked into a scratch root, the installed binary run on the installed
# settings (--check-config), the injection library where `record` looks for
# it, and the unit checked by systemd-analyze verify against that root.
#   packaging/test_package.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: test_package.sh BUILD_DIR}
build=$(cd "$build" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpuflame-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cpack -G DEB -B "$work/out" --config "$build/CPackConfig.cmake" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log" >&2; fail "cpack -G DEB"; }
debs=("$work"/out/gpuflame_*.deb)
[ -f "${debs[0]}" ] || fail "cpack wrote no gpuflame_*.deb: $(ls "$work/out")"
deb=${debs[0]}
echo "package: $(basename "$deb") ($(du -h "$deb" | cut -f1))"

# What it installs, by path (dpkg-deb -c: "./usr/bin/gpuflame" is column 6).
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' | sort >"$work/contents"
for f in /usr/bin/gpuflame /usr/lib/gpuflame/libgpuflame_cupti.so /usr/lib/systemd/system/gpuflame-agent.service \
  /etc/gpuflame/agent.yaml /usr/share/doc/gpuflame/README.md; do
  grep -qx "$f" "$work/contents" || { cat "$work/contents" >&2; fail "the package lacks $f"; }
done
# Nothing of the tests or the build tree slips in.
if grep -E 'test|cuda_sim|/build/' "$work/contents" >&2; then fail "test or build files in the package"; fi

# Control: dependencies found by dpkg-shlibdeps, the settings kept across
# upgrades as a conffile, the maintainer scripts.
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for lib in libbpf1 libc6 libstdc++6; do
  [[ $depends == *"$lib"* ]] || fail "Depends lacks $lib"
done
dpkg-deb -e "$deb" "$work/control"
grep -qx /etc/gpuflame/agent.yaml "$work/control/conffiles" || fail "agent.yaml is not a conffile"
for s in postinst prerm postrm; do
  [ -x "$work/control/$s" ] || fail "no executable $s"
  sh -n "$work/control/$s" || fail "$s is not valid sh"
done

# Installed as dpkg would lay it out.
root=$work/root
dpkg-deb -x "$deb" "$root"
"$root/usr/bin/gpuflame" agent --config "$root/etc/gpuflame/agent.yaml" --check-config >"$work/check.log" 2>&1 ||
  { cat "$work/check.log" >&2; fail "the installed agent refuses the installed agent.yaml"; }
grep -q "localhost:4040" "$work/check.log" || { cat "$work/check.log" >&2; fail "--check-config did not show the settings"; }
# record finds the library at ../lib/gpuflame/ beside its own binary.
[ -f "$root/usr/bin/../lib/gpuflame/libgpuflame_cupti.so" ] || fail "injection library not beside bin/../lib/gpuflame"
# The library's entry point survives the install's strip.
nm -D --defined-only "$root/usr/lib/gpuflame/libgpuflame_cupti.so" >"$work/dynsym"
grep -qw InitializeInjection "$work/dynsym" || fail "libgpuflame_cupti.so lost InitializeInjection"

# The unit, against the unpacked root: ExecStart's binary exists there, every
# directive is known to this systemd. The root gets this machine's own units
# beside ours (the targets ours orders itself after). verify prints warnings
# without failing on some of them, so its output must be empty too.
command -v systemd-analyze >/dev/null || fail "systemd-analyze not found (Debian: systemd; scripts/install-deps.sh --tests)"
unit=$root/usr/lib/systemd/system/gpuflame-agent.service
cp -an /usr/lib/systemd/system/. "$root/usr/lib/systemd/system/"
if ! systemd-analyze verify --man=no --generators=no --root="$root" "$unit" >"$work/verify.log" 2>&1 ||
  [ -s "$work/verify.log" ]; then
  cat "$work/verify.log" >&2
  fail "systemd-analyze verify"
fi
echo "systemd-analyze verify: clean"
# Its hardening, as systemd scores it (0 best, 10 none; 3.4 when written):
# a directive dropped by mistake shows here.
if ! systemd-analyze security --offline=yes --threshold=40 --root="$root" "$unit" >"$work/security.log" 2>&1; then
  cat "$work/security.log" >&2
  fail "the unit's exposure rose past 4.0"
fi
grep -o "Overall exposure level.*" "$work/security.log"
grep -q '^ExecStart=/usr/bin/gpuflame agent --config /etc/gpuflame/agent.yaml$' "$unit" || fail "ExecStart changed"
