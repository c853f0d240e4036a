#!/usr/bin/env bash
# Builds librshmem.so (capi/, release) and installs the C ABI under PREFIX:
#   PREFIX/lib/librshmem.so.<version>, with links librshmem.so.<soname version> and librshmem.so
#   PREFIX/include/rshmem.h, rshmem_mpi.h, rshmem_cuda.h, nvshmem.h, nvshmemx.h (and the
#   nvshmem_generated.h they include), and the device library's headers (rshmem/*.h,
#   rshmem/device/*.h) for CUDA C++ programs
#   PREFIX/lib/pkgconfig/rshmem.pc
# Then `pkg-config --cflags --libs rshmem` (with PKG_CONFIG_PATH=PREFIX/lib/pkgconfig) gives the
# compile and link flags. Usage: scripts/install_c.sh PREFIX   (default PREFIX: target/c)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="$(realpath -m "${1:-$ROOT/target/c}")"
cd "$ROOT"
LOCKED=()
[ "${CI:-}" = "true" ] && LOCKED=(--locked)
cargo build --release -p rshmem-capi "${LOCKED[@]}"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
SONAME="$(readelf -d target/release/librshmem.so | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')"
[ -n "$SONAME" ] || { echo "install_c.sh: target/release/librshmem.so has no soname" >&2; exit 1; }
mkdir -p "$PREFIX/lib/pkgconfig" "$PREFIX/include/rshmem"
install -m 0755 target/release/librshmem.so "$PREFIX/lib/librshmem.so.$VERSION"
ln -sf "librshmem.so.$VERSION" "$PREFIX/lib/$SONAME"
ln -sf "$SONAME" "$PREFIX/lib/librshmem.so"
install -m 0644 capi/include/*.h "$PREFIX/include/"
install -m 0644 triton-lib/include/rshmem/*.h "$PREFIX/include/rshmem/"
# The device library as source, for CUDA C++ programs (rshmem_cuda.h includes it).
mkdir -p "$PREFIX/include/rshmem/device"
install -m 0644 triton-lib/src/*.h "$PREFIX/include/rshmem/device/"
install -m 0644 triton-lib/src/libshmem_device.cu "$PREFIX/include/rshmem/device/libshmem_device.cuh"
install -m 0644 triton-lib/nvrtc/prelude.h "$PREFIX/include/rshmem/device/prelude.h"
# Relocatable: the prefix is found from the .pc file's own place, so the tree may be moved
# (scripts/build_gpu_bundle.sh carries one to another machine).
cat > "$PREFIX/lib/pkgconfig/rshmem.pc" <<PC
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: rshmem
Description: SHMEM runtime for GPUs: the host API for C and C++ (librshmem.so)
Version: $VERSION
Libs: -L\${libdir} -lrshmem
Cflags: -I\${includedir}
PC
echo "install_c.sh: librshmem.so ($SONAME) and headers in $PREFIX; PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig"
