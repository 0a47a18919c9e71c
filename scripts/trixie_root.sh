#!/usr/bin/env bash
# A Debian trixie root entered with chroot: the way to build and run titan-train against
# libtorch 2.x on a bookworm machine. Two flavors:
#
#   cpu  (default) libtorch-dev 2.6 (CPU), Catch2 v3, ~2.5 GB, in .trixie/ inside this checkout
#   cuda (--cuda)  libtorch-cuda-dev 2.6 with CUDA 12.4's nvcc and NCCL 2.22 from trixie's contrib
#                  and non-free components, ~11 GB, in /var/cache/titan-train/trixie-cuda (outside
#                  the checkout, so that every clone on this machine, CI's included, reuses it and
#                  the compiler cache inside it). Builds titan-train with CUDA compiled in on a
#                  machine without a GPU.
#
# TRIXIE_ROOT names another folder for either. Needs root and Debian's debootstrap package
# (installed with apt if missing).
#
#   scripts/trixie_root.sh [--cuda] up [PKG...] create the root once and install the build
#                                               packages (and PKG...) into it
#   scripts/trixie_root.sh [--cuda] run CMD...  run CMD inside the root, in /src, the checkout
#                                               bind-mounted, with a clean environment (pass
#                                               variables with env VAR=x CMD)
#
# The cuda flavor and cuDNN: libtorch-cuda-2.6 depends on nvidia-cudnn, an installer that
# downloads cuDNN from NVIDIA at install time. Its question is preseeded to decline, and the root
# gets a STAND-IN libcudnn.so.9 in /usr/local/lib: every cudnn* function libtorch_cuda.so imports,
# each returning CUDNN_STATUS_NOT_SUPPORTED, so that libtorch_cuda links and loads. It exists for
# compiling titan-train and running its CPU tests on a machine without a GPU; it is never shipped,
# never carried to a GPU machine, and any cuDNN call through it fails.
#
# /proc, /dev and /src are bind-mounted for the command and unmounted when it ends, whether it
# succeeds or not (not after a SIGKILL: then check `mount | grep trixie` before deleting the
# root, since a recursive delete would go through the mounts). Prints the time each step took
# (debootstrap, packages) on stderr.
set -euo pipefail
cd "$(dirname "$0")/.." || exit 1
src=$PWD
flavor=cpu
if [ "${1:-}" = "--cuda" ]; then
  flavor=cuda
  shift
fi
# What the build and the tests need; python3-torch (for a dry run of scripts/gpu_check.sh) is
# asked for with `up python3-torch`: it pulls in much of Python and minutes of install time.
common="libtomlplusplus-dev libcxxopts-dev libfmt-dev catch2 libopenblas0-pthread cmake g++
        ninja-build ccache ca-certificates libpcre2-dev nlohmann-json3-dev"
if [ "$flavor" = cuda ]; then
  root=${TRIXIE_ROOT:-/var/cache/titan-train/trixie-cuda}
  components="main contrib non-free"
  # libtorch-cuda-dev conflicts with the CPU libtorch-dev; libgloo-cuda-dev replaces libgloo-dev.
  packages="libtorch-cuda-dev libgloo-cuda-dev libnccl-dev nvidia-cuda-toolkit nvidia-cuda-dev
            binutils $common"
else
  root=${TRIXIE_ROOT:-$src/.trixie}
  components="main"
  packages="libtorch-dev libgloo-dev $common"
fi

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
    mkdir -p "$root"
    t0=$SECONDS
    debootstrap --variant=minbase --components="${components// /,}" trixie "$root" "$(mirror)" \
      >"$src/.trixie-debootstrap.log" 2>&1 || {
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
  if [ "$installed" -lt "$wanted" ]; then
    t0=$SECONDS
    if [ "$flavor" = cuda ]; then
      # Decline nvidia-cudnn's download from NVIDIA (unreachable, and not ours to accept).
      echo "nvidia-cudnn nvidia-cudnn/question select I Decline" | chroot "$root" debconf-set-selections
    fi
    chroot "$root" bash -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends $(tr -s ' \n' ' ' <<<"$packages") >/dev/null"
    # The .deb files are not needed again: 2.8 GB for the cuda flavor.
    chroot "$root" apt-get clean
    echo "trixie_root: packages took $((SECONDS - t0)) s" >&2
  fi
  if [ "$flavor" = cuda ]; then cudnn_stand_in; fi
}

# Writes /usr/local/lib/libcudnn.so.9 in the cuda root unless it is there: a build-and-CPU-test
# STAND-IN (see the top of this file), one function per cudnn* symbol that libtorch_cuda.so
# imports, each returning CUDNN_STATUS_NOT_SUPPORTED (9). Never for a GPU machine.
cudnn_stand_in() {
  local lib=$root/usr/local/lib/libcudnn.so.9
  if [ -f "$lib" ] && chroot "$root" objdump -T /usr/local/lib/libcudnn.so.9 | grep -q "libcudnn.so.9 *cudnnCreate$"; then
    return 0
  fi
  chroot "$root" bash -c '
    set -euo pipefail
    torch_cuda=$(find /usr/lib -name "libtorch_cuda.so*" -type f | head -1)
    [ -n "$torch_cuda" ] || { echo "trixie_root.sh: libtorch_cuda.so not found" >&2; exit 1; }
    c=/tmp/cudnn_stand_in.c
    echo "/* titan-train build-only stand-in for cuDNN: every function fails. */" >"$c"
    nm -D --undefined-only "$torch_cuda" | awk "{print \$2}" | sed "s/@.*//" | grep "^cudnn" |
      sort -u | while read -r f; do echo "int $f(void) { return 9; }"; done >>"$c"
    # libtorch_cuda.so imports them under the version node libcudnn.so.9 (cudnnCreate@libcudnn.so.9).
    echo "libcudnn.so.9 { global: *; };" >/tmp/cudnn_stand_in.map
    gcc -shared -fPIC -O1 -Wl,-soname,libcudnn.so.9 -Wl,--version-script=/tmp/cudnn_stand_in.map \
      -o /usr/local/lib/libcudnn.so.9 "$c"
    echo "trixie_root: cuDNN stand-in with $(grep -c "^int" "$c") functions in /usr/local/lib" >&2
    rm -f "$c" /tmp/cudnn_stand_in.map
    ldconfig'
}

case "${1:-}" in
  up)
    shift
    if [ $# -gt 0 ]; then packages="$packages $*"; fi
    up ;;
  run)
    shift
    [ $# -gt 0 ] || { echo "usage: trixie_root.sh [--cuda] run CMD..." >&2; exit 2; }
    [ -x "$root/usr/bin/apt-get" ] || { echo "trixie_root.sh: no root at $root; run 'up' first" >&2; exit 2; }
    enter
    # A clean environment: nothing of this machine's (ccache's config, OMP settings) leaks in.
    chroot "$root" env -i -C /src HOME=/root PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
      LANG=C.UTF-8 TERM="${TERM:-dumb}" "$@" ;;
  *) echo "usage: trixie_root.sh [--cuda] up [PKG...] | [--cuda] run CMD..." >&2; exit 2 ;;
esac
