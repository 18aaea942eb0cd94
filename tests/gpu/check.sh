#!/usr/bin/env bash
# The vGPU shim on a real GPU, after the same flow on the CPU against the fake driver.
#
#   tests/gpu/check.sh [BUILD_DIR]      (default build/gpu-check)
#   tests/gpu/check.sh --prebuilt DIR   the GPU half alone, on programs built elsewhere: DIR holds
#                                       fabrica, libfabrica-vgpu.so, vgpu_gpu_check and lib/ (the
#                                       shared libraries fabrica needs that the GPU machine lacks);
#                                       scripts/gpu_bundle.sh makes it
#
# 1. Builds the shim, the fakes and vgpu_gpu_check with the project's CMake.
# 2. CPU flow against the fake libcuda.so.1 / libnvidia-ml.so.1 (so a bug never wastes GPU time):
#    the shim's tests, then every step below.
# 3. With an NVIDIA GPU (nvidia-smi present and libcuda.so.1 loadable): the NVML inventory; the
#    agent's built-in burn-in (`fabrica burn-in`); a
#    program under the shim with a 10 GiB cap (cuMemGetInfo reports 10 GiB, allocating past it
#    fails); cuMemAlloc / cuMemFree / cuLaunchKernel overhead with and without the shim (median of
#    many calls); the work kernel timed alone; two uncapped processes, then one capped at 30%
#    alone, then two capped at 30% and 70%, each launching it flat out, with the share of the
#    GPU's throughput each received (and NVML's per-process utilisation beside the pairs).
#    Without a GPU it says so and exits 0 (1 with --prebuilt, which is only for a GPU machine).
#
# Reads the GPU only: MIG and every other setting are left as they are.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SHARE_MS_GPU=${SHARE_MS_GPU:-15000}
PREBUILT=
if [[ ${1:-} == --prebuilt ]]; then
  PREBUILT=$(cd "${2:?--prebuilt needs a directory}" && pwd)
fi
BUILD=${1:-$ROOT/build/gpu-check}

say() { printf '\n== %s\n' "$*"; }

WORK=$(mktemp -d /tmp/fabrica-gpu-check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# config NAME UUID MEMORY_BYTES COMPUTE_PERMILLE: writes $WORK/NAME.conf, prints its path.
config() {
  printf 'fabrica-vgpu-config 1\ncontainer %s\nregion %s\ndevice %s memory_bytes=%s compute_permille=%s\n' \
    "$1" "$WORK/$1.region" "$2" "$3" "$4" >"$WORK/$1.conf"
  echo "$WORK/$1.conf"
}

# flow LABEL UUID [ENV...]: the checks, with ENV (the fake's library path, or nothing) set.
flow() {
  local label=$1 uuid=$2
  shift 2
  local cap=$((10 * 1024 * 1024 * 1024))
  local vis=()
  [[ $label == gpu ]] && vis=(CUDA_VISIBLE_DEVICES="$uuid")

  say "$label: a 10 GiB cap"
  env "$@" "${vis[@]}" FABRICA_VGPU_CONFIG="$(config "$label-mem" "$uuid" $cap 1000)" \
    LD_PRELOAD="$SHIM" "$PROG" mem $cap

  say "$label: overhead, without and with the shim"
  env "$@" "${vis[@]}" "$PROG" bench 2000 | sed 's/^/without shim: /'
  env "$@" "${vis[@]}" FABRICA_VGPU_CONFIG="$(config "$label-bench" "$uuid" $cap 1000)" \
    LD_PRELOAD="$SHIM" "$PROG" bench 2000 | sed 's/^/with shim:    /'

  local envs=("$@") ms=$SHARE_MS_GPU kernel_us=1000 extra=()
  if [[ $label == cpu ]]; then
    ms=300
    extra=(FABRICA_VGPU_CLOCK=fake FAKECUDA_DEVICE_FILE="$WORK/device" FAKECUDA_CLIENTS=2)
  fi
  say "$label: the work kernel alone, without the shim"
  local calibration iterations alone_us
  calibration=$(env "$@" "${vis[@]}" "$PROG" calibrate $kernel_us)
  echo "$calibration"
  iterations=$(sed -n 's/.*iterations=\([0-9]*\).*/\1/p' <<<"$calibration")
  alone_us=$(sed -n 's/.*alone_us=\([0-9.]*\).*/\1/p' <<<"$calibration")

  # share NAME PERMILLE [MS]: one container launching flat out, in the background; its line
  # lands in $WORK/NAME.out.
  share() {
    env "${envs[@]}" "${vis[@]}" "${extra[@]}" \
      FABRICA_VGPU_CONFIG="$(config "$label-$1" "$uuid" $cap "$2")" \
      LD_PRELOAD="$SHIM" "$PROG" share "${3:-$ms}" "$iterations" "$alone_us" >"$WORK/$1.out"
  }
  if [[ $label == gpu ]]; then
    # What the GPU gives two processes with no cap, and what one capped process takes alone.
    say "gpu: two containers with no cap, launching flat out (5 s)"
    share free-a 1000 5000 &
    local free_a=$!
    share free-b 1000 5000 &
    local free_b=$!
    "$PROG" procutil 4500 || true
    wait $free_a
    wait $free_b
    echo "container 1: $(cat "$WORK/free-a.out")"
    echo "container 2: $(cat "$WORK/free-b.out")"
    say "gpu: one container capped at 30%, alone (5 s)"
    share alone 300 5000
    echo "30% container: $(cat "$WORK/alone.out")"
  fi

  say "$label: two containers capped at 30% and 70% of compute, launching flat out"
  share a 300 &
  local a=$!
  share b 700 &
  local b=$!
  [[ $label == gpu ]] && { "$PROG" procutil $((ms - 500)) || true; }
  wait $a
  wait $b
  echo "30% container: $(cat "$WORK/a.out")"
  echo "70% container: $(cat "$WORK/b.out")"
  if [[ $label == cpu ]]; then
    # On the virtual clock the shares are exact enough to check.
    # (A container that printed nothing fails too.)
    awk -F'work=' '{ n++; if ($2 < 0.27 || $2 > 0.33) exit 1 } END { if (!n) exit 1 }' "$WORK/a.out"
    awk -F'work=' '{ n++; if ($2 < 0.63 || $2 > 0.77) exit 1 } END { if (!n) exit 1 }' "$WORK/b.out"
  fi
}

if [[ -n $PREBUILT ]]; then
  say "prebuilt programs ($PREBUILT)"
  FABRICA=$PREBUILT/fabrica
  SHIM=$PREBUILT/libfabrica-vgpu.so
  PROG=$PREBUILT/vgpu_gpu_check
  export LD_LIBRARY_PATH=$PREBUILT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if ldd "$FABRICA" | grep 'not found'; then
    echo "fabrica lacks the shared libraries above" >&2
    exit 1
  fi
else
  say "build ($BUILD)"
  # A build directory that exists (the test suite's own, in CI) keeps its configuration.
  if [[ ! -f $BUILD/CMakeCache.txt ]]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFABRICA_BENCH=OFF >/dev/null
  fi
  cmake --build "$BUILD" -j"$(nproc)" --target fabrica-vgpu vgpu_gpu_check shim_test fakecuda \
    fakenvml fabrica fake_nvml >/dev/null
  FABRICA=$BUILD/src/cli/fabrica

  SHIM=$BUILD/src/shim/libfabrica-vgpu.so
  PROG=$BUILD/tests/gpu/vgpu_gpu_check
  FAKE_LIBS=$BUILD/tests/fakecuda/lib

  say "cpu: the shim's tests against the fake driver"
  "$BUILD/tests/shim/shim_test" --gtest_brief=1

  say "cpu: NVML inventory (fake)"
  LD_LIBRARY_PATH=$FAKE_LIBS "$PROG" nvml
  # The agent's discovery through the same dlopen path, against the richer fake (MIG, NVLink).
  FABRICA_NVML_LIBRARY=$BUILD/tests/fakenvml/libnvidia-ml.so.1 "$FABRICA" devices --devices nvml \
    --node fake-node
  say "cpu: the agent's built-in burn-in (the fake computes its kernel on the host)"
  FABRICA_CUDA_LIBRARY=$FAKE_LIBS/libcuda.so.1 "$FABRICA" burn-in --seconds 0.1 --mib 16 \
    --threads 4096
  flow cpu GPU-face0000-0000-0000-0000-000000000000 LD_LIBRARY_PATH="$FAKE_LIBS"
  say "cpu: all checks passed"
fi

if ! command -v nvidia-smi >/dev/null || ! probe=$("$PROG" probe 2>&1); then
  say "no NVIDIA GPU here (nvidia-smi missing or libcuda.so.1 not loadable): GPU part skipped"
  [[ -n ${probe:-} ]] && echo "probe: $probe"
  # Asked to run the GPU half alone, finding no GPU is a failure.
  [[ -z $PREBUILT ]]
  exit
fi

say "gpu: NVML inventory (real driver)"
"$FABRICA" devices --devices nvml || echo "(fabrica devices failed; the program's view follows)"
"$FABRICA" devices --devices nvml --format metrics | head -40 || true
"$PROG" nvml
nvidia-smi --query-gpu=index,name,uuid,memory.total,mig.mode.current --format=csv
say "gpu: the agent's built-in burn-in (memory patterns, checked xorshift kernel), 20 s"
"$FABRICA" burn-in --gpu 0 --seconds 20 --mib 8192 || echo "(burn-in FAILED)"
UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')
flow gpu "$UUID"
say "gpu: done"
