#!/usr/bin/env bash
# Install QEMU 10 (system and user mode) and the FAT tools from bookworm-backports, through a private
# apt sources list that reuses the mirror already configured on this machine. Idempotent.
# Usage: install-qemu.sh CACHE_DIR [EXTRA_PACKAGE...]
set -euo pipefail
dir="$1/apt"
shift
pkgs=(qemu-system-arm qemu-system-misc qemu-user dosfstools mtools "$@")
have_all=1
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || have_all=0
done
if [ "$have_all" = 1 ] && qemu-system-aarch64 --version 2>/dev/null | grep -q "version 1[0-9]"; then
    echo "install-qemu: QEMU $(qemu-system-aarch64 --version | head -1 | awk '{print $4}') and tools already installed"
    exit 0
fi
src=/etc/apt/sources.list.d/debian.sources
uri=$(awk '/^URIs:/ {print $2; exit}' "$src" 2>/dev/null || true)
if [ -z "$uri" ]; then
    echo "install-qemu: no Debian mirror found in $src" >&2
    exit 1
fi
mkdir -p "$dir/lists/partial" "$dir/archives/partial"
: > "$dir/sources.list"
for suite in bookworm bookworm-backports; do
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $suite main non-free-firmware" >> "$dir/sources.list"
done
APTO=(-o "Dir::Etc::sourcelist=$dir/sources.list" -o "Dir::Etc::sourceparts=-"
      -o "Dir::State::lists=$dir/lists" -o "Dir::Cache::archives=$dir/archives")
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get "${APTO[@]}" -q update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${APTO[@]}" -q install -y -t bookworm-backports --no-install-recommends "${pkgs[@]}"
qemu-system-aarch64 --version | head -1
