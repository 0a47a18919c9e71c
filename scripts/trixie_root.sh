#!/usr/bin/env bash
# A Debian trixie root (libtorch-dev 2.6 CPU, python3-torch 2.6, Catch2 v3) inside this checkout,
# entered with chroot: the way to build and run titan-train against libtorch 2.x on a bookworm
# machine without a GPU. Needs root, Debian's debootstrap package (installed with apt if missing)
# and ~2.5 GB. The root lives in .trixie/ (ignored by git) unless TRIXIE_ROOT names another folder.
#
#   scripts/trixie_root.sh up [PKG...] create the root once and install the build packages (and
#                                      PKG...) into it
#   scripts/trixie_root.sh run CMD...  run CMD inside the root, in /src, the checkout bind-mounted,
#                                      with a clean environment (pass variables with env VAR=x CMD)
#
# /proc, /dev and /src are bind-mounted for the command and unmounted when it ends, whether it
# succeeds or not (not after a SIGKILL: then check `mount | grep .trixie` before deleting the
# root, since a recursive delete would go through the mounts). Prints the time each step took
# (debootstrap, packages) on stderr.
set -euo pipefail
cd "$(dirname "$0")/.." || exit 1
src=$PWD
root=${TRIXIE_ROOT:-$src/.trixie}
# What the build and the tests need; python3-torch (for a dry run of scripts/gpu_check.sh) is
# asked for with `up python3-torch`: it pulls in much of Python and minutes of install time.
packages="libtorch-dev libtomlplusplus-dev libcxxopts-dev libfmt-dev catch2 libgloo-dev
          libopenblas0-pthread cmake g++ ninja-build ccache ca-certificates"

if [ "$(id -u)" -ne 0 ]; then
  echo "trixie_root.sh: must run as root (debootstrap and chroot)" >&2
  exit 2
fi

# The Debian mirror this machine's apt already uses (deb822 or one-line format).
mirror() {
  local m
  m=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  [ -n "$m" ] || m=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  echo "${m:-http://deb.debian.org/debian}"
}

mounted=()
unmount_all() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" || true; done
  mounted=()
}
trap unmount_all EXIT INT TERM

# bind FROM TO: mounts FROM at TO for the rest of this script. Always a new mount, stacked on
# any already there, so that two runs at once each unmount only their own.
bind() {
  mkdir -p "$2"
  mount --bind "$1" "$2"
  mounted+=("$2")
}

enter() {
  bind /proc "$root/proc"
  bind /dev "$root/dev"
  bind "$src" "$root/src"
}

up() {
  local t0
  if [ ! -x "$root/usr/bin/apt-get" ]; then
    command -v debootstrap >/dev/null || {
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    }
    t0=$SECONDS
    debootstrap --variant=minbase trixie "$root" "$(mirror)" >"$src/.trixie-debootstrap.log" 2>&1 || {
      tail -20 "$src/.trixie-debootstrap.log" >&2
      echo "trixie_root.sh: debootstrap failed (log: .trixie-debootstrap.log)" >&2
      exit 1
    }
    echo "trixie_root: debootstrap took $((SECONDS - t0)) s" >&2
  fi
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  enter
  local wanted installed
  wanted=$(wc -w <<<"$packages")
  # shellcheck disable=SC2016,SC2086
  # dpkg-query and grep -c both exit 1 when nothing is installed yet (a fresh root): not an error.
  installed=$(chroot "$root" dpkg-query -W -f='${db:Status-Abbrev}\n' $packages 2>/dev/null | grep -c '^ii' || true)
  [ "$installed" -lt "$wanted" ] || return 0
  t0=$SECONDS
  chroot "$root" bash -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends $(tr -s ' \n' ' ' <<<"$packages") >/dev/null"
  echo "trixie_root: packages took $((SECONDS - t0)) s" >&2
}

case "${1:-}" in
  up)
    shift
    if [ $# -gt 0 ]; then packages="$packages $*"; fi
    up ;;
  run)
    shift
    [ $# -gt 0 ] || { echo "usage: trixie_root.sh run CMD..." >&2; exit 2; }
    [ -x "$root/usr/bin/apt-get" ] || { echo "trixie_root.sh: no root at $root; run 'up' first" >&2; exit 2; }
    enter
    # A clean environment: nothing of this machine's (ccache's config, OMP settings) leaks in.
    chroot "$root" env -i -C /src HOME=/root PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
      LANG=C.UTF-8 TERM="${TERM:-dumb}" "$@" ;;
  *) echo "usage: trixie_root.sh up [PKG...] | run CMD..." >&2; exit 2 ;;
esac
