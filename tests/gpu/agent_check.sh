#!/usr/bin/env bash
# The whole chain on a real GPU: a control plane, a node agent that finds the GPU through NVML,
# and fractional workloads that the scheduler places on it and the agent runs under the vGPU shim.
#
#   tests/gpu/agent_check.sh --prebuilt DIR    programs from scripts/gpu_bundle.sh (the GPU machine)
#   tests/gpu/agent_check.sh BUILD_DIR         a build directory (programs at their build paths)
#
# 1. `fabrica server` on loopback, a trusted tenant team-a, a token for node gpu-0.
# 2. `fabrica agent --devices nvml --shim libfabrica-vgpu.so`: the node registers with what NVML
#    reports and turns Ready. (FABRICA_AGENT_DEVICES=sim:FLEET, with LD_LIBRARY_PATH naming the
#    fake driver of tests/fakecuda and the fleet's GPU its device, runs the same flow on a CPU.)
# 3. A workload asking half the GPU (gpuMilli 500m) runs `vgpu_gpu_check mem CAP` with CAP half the
#    GPU's memory as the node registered it: the shim that the agent set up must report exactly
#    that and refuse an allocation past it.
# 4. Two workloads of 300m and 700m run `vgpu_gpu_check share` side by side on the same GPU: the
#    compute shares the agent's shim configs enforce, as work done.
# Reads the GPU only: MIG and every other setting are left as they are.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# (A pod's environment is the agent's own making: the driver's library path, where the machine
# sets one, is handed to the test program explicitly.)
DRIVER_PATH=${LD_LIBRARY_PATH:-}
if [[ ${1:-} == --prebuilt ]]; then
  DIR=$(cd "${2:?--prebuilt needs a directory}" && pwd)
  FABRICA=$DIR/fabrica FABCTL=$DIR/fabctl SHIM=$DIR/libfabrica-vgpu.so PROG=$DIR/vgpu_gpu_check
  export LD_LIBRARY_PATH=$DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
  BUILD=$(cd "${1:-$ROOT/build/release}" && pwd)
  FABRICA=$BUILD/src/cli/fabrica FABCTL=$BUILD/src/cli/fabctl
  SHIM=$BUILD/src/shim/libfabrica-vgpu.so PROG=$BUILD/tests/gpu/vgpu_gpu_check
fi
DEVICES=${FABRICA_AGENT_DEVICES:-nvml}
SHARE_MS=${SHARE_MS:-8000}
PORT=${PORT:-18950}
TOKEN=admin-token-gpu-check-0123456789

say() { printf '\n== %s\n' "$*"; }
WORK=$(mktemp -d /tmp/fabrica-agent-check.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$WORK"/*.log; do
    echo "--- $f" >&2
    tail -30 "$f" >&2
  done
  exit 1
}
fabctl() { "$FABCTL" --server "http://127.0.0.1:$PORT" --token "$TOKEN" "$@"; }
# until SECONDS COMMAND...: runs COMMAND every half second until it succeeds, or fails.
until_ok() {
  local end=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < end)) || return 1
    sleep 0.5
  done
}

say "control plane on 127.0.0.1:$PORT"
printf 'tokens:\n  - {token: %s, user: admin}\nbindings:\n  - {role: platform-admin, user: admin}\n' \
  "$TOKEN" >"$WORK/auth.yaml"
"$FABRICA" server --data "$WORK/data" --listen "127.0.0.1:$PORT" --plain-http \
  --auth "$WORK/auth.yaml" --gang-timeout 120 >"$WORK/server.log" 2>&1 &
PIDS+=($!)
until_ok 20 fabctl get nodes || fail "the server did not answer"
cat >"$WORK/tenant.yaml" <<EOF
apiVersion: fabrica.dev/v1
kind: Tenant
metadata: {name: team-a}
spec: {trust: trusted}
EOF
fabctl apply -f "$WORK/tenant.yaml"
NODE_TOKEN=$(fabctl nodes token gpu-0)

say "agent on node gpu-0 (devices: $DEVICES)"
"$FABRICA" agent --server "http://127.0.0.1:$PORT" --token "$NODE_TOKEN" --node gpu-0 \
  --devices "$DEVICES" --shim "$SHIM" --state-dir "$WORK/agent" --heartbeat-seconds 1 \
  --poll-seconds 0.2 --sample-seconds 1 --dcgmi "" --nccl-all-reduce "" --gpu-burn-seconds 5 \
  --gpu-burn-mib 2048 >"$WORK/agent.log" 2>&1 &
PIDS+=($!)
# (A new node is inspected and burnt in before it takes work: Ready with nothing after it.)
ready() { fabctl get nodes | grep -E '^gpu-0 +Ready +[0-9]'; }
until_ok 180 ready || fail "node gpu-0 did not turn Ready and in service"
fabctl get nodes
fabctl describe node gpu-0 | sed -n '1,40p'
# (The first GPU's memory in MiB, from the spec's "80Gi" or "143771Mi".)
MEMORY=$(fabctl get node gpu-0 -o json | tr -d ' \n' | sed -n 's/.*"devices":\[{[^}]*"memory":"\([0-9]*\)\([GM]\)i".*/\1 \2/p' |
  awk '{ print $2 == "G" ? $1 * 1024 : $1 }')
[[ -n $MEMORY ]] || fail "no GPU memory in the node's spec"
echo "GPU memory as registered: ${MEMORY}Mi"

# workload NAME MILLI COMMAND...: a one-pod workload of team-a with a GPU share of MILLI.
workload() {
  local name=$1 milli=$2 args=""
  shift 2
  for a in env "LD_LIBRARY_PATH=$DRIVER_PATH" "$@"; do args+="${args:+, }\"$a\""; done
  cat >"$WORK/$name.yaml" <<EOF
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: $name, namespace: team-a}
spec:
  podSets:
    - {name: main, count: 1, cpu: "1", memory: 1Gi, devices: {gpuMilli: ${milli}m}}
  run: {command: [$args]}
EOF
  fabctl apply -f "$WORK/$name.yaml"
}
phase() { fabctl get workload "$1" -n team-a -o json | sed -n 's/.*"phase": *"\([A-Za-z]*\)".*/\1/p' | head -1; }
done_() { [[ $(phase "$1") == Succeeded || $(phase "$1") == Failed ]]; }

say "half the GPU: the agent's shim caps memory at half of ${MEMORY}Mi"
# (As the agent sizes a share: whole MiB, rounded down.)
CAP=$((MEMORY * 500 / 1000 * 1048576))
workload half 500 "$PROG" mem "$CAP"
until_ok 180 done_ half || fail "workload half did not finish"
fabctl logs half -n team-a | tee "$WORK/half.out"
[[ $(phase half) == Succeeded ]] || fail "workload half: $(phase half)"
grep -q 'mem: PASS' "$WORK/half.out" || fail "workload half did not pass"

say "30% and 70% of the GPU side by side, each launching flat out"
CALIBRATION=$(LD_LIBRARY_PATH=$DRIVER_PATH "$PROG" calibrate 1000)
echo "$CALIBRATION"
ITERATIONS=$(sed -n 's/.*iterations=\([0-9]*\).*/\1/p' <<<"$CALIBRATION")
ALONE_US=$(sed -n 's/.*alone_us=\([0-9.]*\).*/\1/p' <<<"$CALIBRATION")
workload share-30 300 "$PROG" share "$SHARE_MS" "$ITERATIONS" "$ALONE_US"
workload share-70 700 "$PROG" share "$SHARE_MS" "$ITERATIONS" "$ALONE_US"
until_ok 240 done_ share-30 || fail "workload share-30 did not finish"
until_ok 60 done_ share-70 || fail "workload share-70 did not finish"
fabctl get workloads -n team-a -o wide
for w in share-30 share-70; do
  [[ $(phase $w) == Succeeded ]] || fail "workload $w: $(phase $w)"
  fabctl logs $w -n team-a | tee "$WORK/$w.out"
done
if [[ $DEVICES == nvml ]]; then
  # A cap is a ceiling (10% of slack, relative); what each gets under contention is reported.
  awk -F'work=' '{ n++; if ($2 > 0.33) exit 1 } END { if (!n) exit 1 }' "$WORK/share-30.out" ||
    fail "the 30% workload took more than its share"
  awk -F'work=' '{ n++; if ($2 > 0.77) exit 1 } END { if (!n) exit 1 }' "$WORK/share-70.out" ||
    fail "the 70% workload took more than its share"
fi
fabctl top nodes || true
say "agent check: all passed"
