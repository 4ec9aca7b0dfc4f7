#!/usr/bin/env bash
# Proves the bzlmod path once: builds and tests this repository with Debian
# sid's Bazel 7 inside a debootstrap chroot (sid's bazel needs a newer glibc
# than the host has). Needs root; ~2 min and ~1.5 GiB the first time.
#
#   sudo tools/bazel7_chroot.sh [bazel test targets...]
#
# The chroot gets the repository, the host's pinned Python (RL_PYTHON) and
# pip's local find-links folder through bind mounts, and uses
# --config=bazel7_offline to stand in for registry modules (docs/building.md).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
root=${BAZEL7_CHROOT:-/var/tmp/rl-harness-bazel7-sid}
python=${RL_PYTHON:-$(python3.11 -c 'import os, sys; print(os.path.realpath(sys.executable))')}
python_home=$(dirname "$(dirname "$python")")
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(//tools/... //rl:layering_test)

# Same mirror as the host's apt sources (no host names baked into the repo).
mirror=$(grep -hoE '^URIs: *[^ ]+' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 | awk '{print $2}')
[ -n "$mirror" ] || mirror=$(grep -hoE '^deb +[^ ]+' /etc/apt/sources.list 2>/dev/null | head -n1 | awk '{print $2}')
[ -n "$mirror" ] || { echo "bazel7_chroot: no Debian mirror found in apt sources" >&2; exit 1; }

if [ ! -d "$root/usr/bin" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap
  echo "bazel7_chroot: creating sid chroot in $root" >&2
  debootstrap --variant=minbase sid "$root" "$mirror"
fi

mounts=("$repo:/src" "$python_home:$python_home" "/proc:/proc" "/dev:/dev")
[ -d /opt/wheels ] && mounts+=("/opt/wheels:/opt/wheels")
# The host's CA bundle (it may trust a proxy that sid's bundle does not).
ca_bundle=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
mounts+=("$ca_bundle:/etc/rl-host-ca.crt")
cleanup() {
  for ((i=${#mounts[@]}-1; i>=0; i--)); do umount "$root${mounts[$i]#*:}" 2>/dev/null || true; done
}
trap cleanup EXIT
for spec in "${mounts[@]}"; do
  if [ -d "${spec%%:*}" ]; then mkdir -p "$root${spec#*:}"; else touch "$root${spec#*:}"; fi
  mount --bind "${spec%%:*}" "$root${spec#*:}"
done
cp /etc/resolv.conf "$root/etc/resolv.conf"

# apt's resolver copes with sid's library transitions better than debootstrap's;
# Java's post-install scripts need /proc, hence after the mounts. Idempotent.
chroot "$root" env DEBIAN_FRONTEND=noninteractive sh -c \
  'dpkg --configure -a && apt-get install -y -qq bazel-bootstrap zip g++ git ca-certificates >/dev/null'


chroot "$root" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  RL_PYTHON="$python" PIP_FIND_LINKS=/opt/wheels PIP_CERT=/etc/rl-host-ca.crt \
  bash -c "cd /src && bazel --version && bazel --output_user_root=/root/.cache/bazel7 test --config=bazel7_offline --experimental_convenience_symlinks=ignore ${targets[*]}"
