#!/usr/bin/env bash
# Builds and tests this repository with Debian sid's Bazel 7 (bzlmod) inside a debootstrap
# chroot: sid's bazel needs a newer glibc than the host has. Needs root. CI runs it on the
# fast tier (.ci/run); docs/building.md gives its times.
#
#   sudo tools/bazel7_chroot.sh [bazel test targets...]     (default: //rl/... //tools/...)
#
# The chroot lives in $BAZEL7_CHROOT (default ~/.cache/rl_harness/bazel7-sid) and is kept:
# it holds Bazel 7's own output base and disk cache, apart from Bazel 4's. Only creating it
# needs a Debian mirror ($BAZEL7_MIRROR, else the host's apt one); later runs work offline.
# It sees the repository read-only (no build may write into a checkout), the host's pinned
# Python (RL_PYTHON), the host's venv cache (the same venv serves both Bazels) and pip's
# local find-links folder, and uses --config=bazel7_offline to stand in for registry modules.
#
# Exit status: Bazel's own (0 all passed, 3 a test failed, ...), or 90 when the chroot
# could not be set up (mirror unreachable, sid's packages uninstallable).
set -euo pipefail

readonly SETUP_FAILED=90
repo=$(cd "$(dirname "$0")/.." && pwd)
root=${BAZEL7_CHROOT:-$HOME/.cache/rl_harness/bazel7-sid}
python=${RL_PYTHON:-$(python3.11 -c 'import os, sys; print(os.path.realpath(sys.executable))')}
python_home=$(dirname "$(dirname "$python")")
venv_cache=${RL_PYTHON_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rl_harness/venvs}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(//rl/... //tools/...)

setup_failed() { echo "bazel7_chroot: $1" >&2; exit "$SETUP_FAILED"; }
[ "$(id -u)" -eq 0 ] || setup_failed "needs root (debootstrap, mount, chroot): run it with sudo"

# One run at a time per chroot: the bind mounts below are shared.
mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
flock 9

# Mounts left by a killed run are stale (this run holds the lock): unmount them, deepest
# first, and never delete through one.
stale_mounts() { awk -v prefix="$root/" 'index($2, prefix) == 1 {print $2}' /proc/mounts | sort -r; }
for stale in $(stale_mounts); do umount "$stale" || true; done
[ -z "$(stale_mounts)" ] || setup_failed "cannot unmount what an earlier run left under $root: $(stale_mounts | tr '\n' ' ')"

# $BAZEL7_MIRROR, else the same mirror as the host's apt sources (no host names baked in).
mirror=${BAZEL7_MIRROR:-}
[ -n "$mirror" ] || mirror=$(grep -hoE '^URIs: *[^ ]+' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 | awk '{print $2}')
[ -n "$mirror" ] || mirror=$(grep -hoE '^deb +[^ ]+' /etc/apt/sources.list 2>/dev/null | head -n1 | awk '{print $2}')

# Markers: .rl-debootstrapped once debootstrap finished, .rl-ready once Bazel 7 is installed.
if [ ! -e "$root/.rl-debootstrapped" ]; then
  [ -n "$mirror" ] || setup_failed "no Debian mirror found in the host's apt sources"
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null \
    || setup_failed "debootstrap is missing and apt-get could not install it"
  echo "bazel7_chroot: creating the sid chroot in $root" >&2
  rm -rf "$root"
  nice -n 10 debootstrap --variant=minbase sid "$root" "$mirror" >"$root.debootstrap.log" 2>&1 \
    || setup_failed "debootstrap of sid from $mirror failed (log: $root.debootstrap.log)"
  touch "$root/.rl-debootstrapped"
fi

mounts=("$repo:/src" "$python_home:$python_home" "$venv_cache:/root/.cache/rl_harness/venvs"
        "/proc:/proc" "/dev:/dev")
[ -d /opt/wheels ] && mounts+=("/opt/wheels:/opt/wheels")
# The host's CA bundle (it may trust a proxy that sid's bundle does not).
ca_bundle=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
mounts+=("$ca_bundle:/etc/rl-host-ca.crt")
mkdir -p "$venv_cache"
mounted=()
cleanup() {
  for ((i=${#mounted[@]}-1; i>=0; i--)); do umount "${mounted[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
for spec in "${mounts[@]}"; do
  target="$root${spec#*:}"
  if [ -d "${spec%%:*}" ]; then mkdir -p "$target"; else touch "$target"; fi
  mount --bind "${spec%%:*}" "$target"
  mounted+=("$target")
done
mount -o remount,bind,ro "$root/src"
cp /etc/resolv.conf "$root/etc/resolv.conf"

if [ ! -e "$root/.rl-ready" ]; then
  # apt's resolver copes with sid's library transitions better than debootstrap's;
  # Java's post-install scripts need /proc, hence after the mounts.
  nice -n 10 chroot "$root" env DEBIAN_FRONTEND=noninteractive sh -c \
    'dpkg --configure -a && apt-get install -y -qq bazel-bootstrap zip g++ git ca-certificates >/dev/null' 9>&- \
    || setup_failed "installing bazel-bootstrap in the sid chroot failed (sid unreachable or in transition)"
  touch "$root/.rl-ready"
fi

# No convenience symlinks and no MODULE.bazel.lock: the checkout is read-only in here.
nice -n 10 chroot "$root" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  RL_PYTHON="$python" PIP_FIND_LINKS=/opt/wheels PIP_CERT=/etc/rl-host-ca.crt \
  bash -c "cd /src && bazel --version && bazel --output_user_root=/root/.cache/bazel7 test \
    --config=bazel7_offline --experimental_convenience_symlinks=ignore --lockfile_mode=off ${targets[*]}; \
    status=\$?; bazel --output_user_root=/root/.cache/bazel7 shutdown; exit \$status" 9>&-
