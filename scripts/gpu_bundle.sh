#!/usr/bin/env bash
# Gathers what tests/gpu/check.sh --prebuilt needs to run the GPU half on a machine that has a GPU
# but not this project's build dependencies (a CUDA image without yaml-cpp, GLPK, SQLite …):
#
#   scripts/gpu_bundle.sh [BUILD_DIR] [OUT_DIR]     (defaults build/release and .gpu)
#
# OUT_DIR gets fabrica, fabctl, libfabrica-vgpu.so and vgpu_gpu_check, stripped, and lib/ with the shared
# libraries fabrica links beyond the C and C++ runtimes (which every such machine has, in a version
# at least as new). Build the three targets first.
set -euo pipefail

BUILD=${1:-build/release}
OUT=${2:-.gpu}
rm -rf "$OUT"
mkdir -p "$OUT/lib"
strip -o "$OUT/fabrica" "$BUILD/src/cli/fabrica"
strip -o "$OUT/fabctl" "$BUILD/src/cli/fabctl"
strip -o "$OUT/libfabrica-vgpu.so" "$BUILD/src/shim/libfabrica-vgpu.so"
strip -o "$OUT/vgpu_gpu_check" "$BUILD/tests/gpu/vgpu_gpu_check"
ldd "$BUILD/src/cli/fabrica" | awk '$3 ~ /^\// { print $3 }' |
  { grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libz|libpthread|libdl|librt|ld-linux[^/]*)\.so' || true; } |
  while read -r lib; do
  cp -L "$lib" "$OUT/lib/"
done
du -sh "$OUT"
