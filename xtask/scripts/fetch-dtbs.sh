#!/usr/bin/env bash
# Fetch files out of a Debian package of another architecture (DEB_ARCH, default arm64) of the
# suite DEB_SUITE (default bookworm) into the cache: the Raspberry Pi device trees from the arm64
# kernel package (Debian's raspi-firmware ships none), U-Boot for the Allwinner boards from the
# armhf u-boot-sunxi package, the kernels llama.cpp runs on (xtask/src/llamacpp.rs; riscv64 from
# trixie, as bookworm has no riscv64 port). Through a private apt
# list for that architecture that reuses the mirror already configured on this machine (as
# install-qemu.sh does). Only the named files are kept; the package is removed once they are out.
# xtask checks their sha256 (xtask/src/dtb.rs and xtask/src/uboot.rs pin them).
# Usage: fetch-dtbs.sh CACHE_DIR PACKAGE VERSION DIR_IN_PACKAGE OUT_DIR FILE...
set -euo pipefail
cache="$1"; pkg="$2"; version="$3"; inside="$4"; out="$5"
shift 5
arch="${DEB_ARCH:-arm64}"
suite="${DEB_SUITE:-bookworm}"
dir="$cache/apt-$arch"
[ "$suite" = bookworm ] || dir="$cache/apt-$suite-$arch"
src=/etc/apt/sources.list.d/debian.sources
uri=$(awk '/^URIs:/ {print $2; exit}' "$src" 2>/dev/null || true)
if [ -z "$uri" ]; then
    echo "fetch-dtbs: no Debian mirror found in $src" >&2
    exit 1
fi
mkdir -p "$dir/lists/partial" "$dir/archives/partial" "$out"
echo "deb [arch=$arch signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $suite main" > "$dir/sources.list"
: > "$dir/status"
APTO=(-o "Dir::Etc::sourcelist=$dir/sources.list" -o "Dir::Etc::sourceparts=-"
      -o "Dir::State::lists=$dir/lists" -o "Dir::Cache::archives=$dir/archives"
      -o "Dir::State::status=$dir/status" -o "APT::Architectures::=$arch" -o "APT::Architecture=$arch"
      -o "APT::Sandbox::User=root")
apt-get "${APTO[@]}" -q update
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# apt-get download writes into the current directory (a private one, hence no sandbox user).
(cd "$work" && apt-get "${APTO[@]}" -q download "$pkg=$version")
deb=$(ls "$work"/*.deb)
members=()
for f in "$@"; do members+=("./$inside/$f"); done
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" "${members[@]}"
for f in "$@"; do cp "$work/$inside/$f" "$out/$f"; done
echo "fetch-dtbs: $* from $pkg $version into $out"
