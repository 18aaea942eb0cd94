#!/usr/bin/env bash
# The real kubectl against `fabrica up` (HTTPS, a time scale of 60): `kubectl get` asks for a
# Table and prints the server's columns — fabctl's PHASE, PODS, GPUS and NODES for workloads
# (QUEUE, PRIORITY and MESSAGE with -o wide), STATUS and GPUS for nodes, TRUST for tenants —
# with AGE counted on the server's clock (kubectl counting it from the timestamps read
# "<invalid>": the scaled clock runs ahead of the wall clock). A single get, `-A` and watches
# (one row an event; one object's from it as it is now, not its history) too; events in
# kubectl's own columns; a missing workload said missing, not its tenant; `-o name` and
# `-o jsonpath` still read the objects.
# Usage: kubectl_table_test.sh FABRICA_BIN FABCTL_BIN SOURCE_DIR. Exit 77 (skip) without
# kubectl (Debian package `kubernetes-client`; scripts/dev test installs it).
set -euo pipefail
FABRICA=$1
FABCTL=$2
if ! command -v kubectl >/dev/null; then
  echo "SKIP: kubectl is not installed (apt-get install kubernetes-client)"
  exit 77
fi
source "$(dirname "$0")/factory_lib.sh"
fail() { echo "FAIL: $*"; tail -5 "$tmp/up.log"; exit 1; }
FACTORY_TLS=1 start_factory --time-scale 60
export FABRICA_CONFIG="$tmp/data/fabctl.yaml"
[ -s "$FABRICA_CONFIG" ] || fail "no fabctl config from fabrica up"
token=$(sed -n 's/^token: //p' "$FABRICA_CONFIG")
k() {
  kubectl --server "https://127.0.0.1:$port" --certificate-authority "$tmp/data/ca.crt" \
    --token "$token" --cache-dir "$tmp/kube-cache" "$@"
}
workload() {
  cat <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: $1, namespace: team-a}
spec:
  podSets: [{name: main, count: 2, cpu: 2, memory: 8Gi, devices: {gpus: 1}}]
  run: {command: [train], durationSeconds: 360000}
YAML
}
workload w1 | "$FABCTL" apply -f - >/dev/null || fail "apply w1"
for _ in $(seq 50); do
  [ "$("$FABCTL" get wl w1 -n team-a -o jsonpath='{.status.phase}')" = Running ] && break
  sleep 0.2
done
node=$("$FABCTL" get wl w1 -n team-a -o jsonpath='{.status.assignments[0].node}')
[ -n "$node" ] || fail "w1 was not placed"

# (Columns split on runs of blanks.)
row() { awk -v name="$1" '$1 == name || $2 == name' | tr -s ' '; }
out=$(k get wl -n team-a) || fail "kubectl get wl: $out"
echo "$out" | head -1 | tr -s ' ' | grep -qx "NAME PHASE PODS GPUS NODES AGE" ||
  fail "kubectl get wl columns: $out"
line=$(echo "$out" | row w1)
echo "$line" | grep -Eq "^w1 Running 2 2 $node [0-9]+(s|m[0-9]*s?|h[0-9]*m?)$" ||
  fail "kubectl get wl row: '$line' (all: $out)"

out=$(k get wl -n team-a -o wide) || fail "kubectl get wl -o wide: $out"
echo "$out" | head -1 | tr -s ' ' | grep -qx "NAME PHASE PODS GPUS NODES AGE QUEUE PRIORITY MESSAGE" ||
  fail "kubectl get wl -o wide columns: $out"
echo "$out" | row w1 | grep -q " 0 running on $node" || fail "kubectl get wl -o wide row: $out"

out=$(k get wl -A) || fail "kubectl get wl -A: $out"
echo "$out" | tr -s ' ' | grep -q "^team-a w1 Running 2 2 $node " || fail "kubectl get wl -A: $out"
out=$(k get wl w1 -n team-a) || fail "kubectl get wl w1: $out"
echo "$out" | row w1 | grep -q "^w1 Running 2 2 $node " || fail "kubectl get wl w1: $out"
if echo "$out" | grep -q "invalid"; then fail "AGE read as invalid: $out"; fi

out=$(k get nodes) || fail "kubectl get nodes: $out"
echo "$out" | head -1 | tr -s ' ' | grep -qx "NAME STATUS GPUS MODEL LEAF AGE" ||
  fail "kubectl get nodes columns: $out"
echo "$out" | row "$node" | grep -Eq "^$node Ready [0-9]+ [A-Z0-9]+ " || fail "kubectl get nodes: $out"
out=$(k get tenants) || fail "kubectl get tenants: $out"
echo "$out" | row partner-x | grep -q "^partner-x untrusted partner-x " ||
  fail "kubectl get tenants: $out"

# Queues' wide columns as fabctl's: the over-quota priority, what it borrows and its limits;
# typed cells (a number, a boolean) printed as kubectl prints them.
printf 'apiVersion: fabrica.dev/v1\nkind: Queue\nmetadata: {name: lab}\nspec: {priority: 3, quotas: {gpu: {guaranteed: 2, borrowingLimit: 4}}}\n' |
  "$FABCTL" apply -f - >/dev/null || fail "apply queue lab"
for _ in $(seq 50); do
  [ "$("$FABCTL" get queue lab -o jsonpath='{.status.active}')" = true ] && break
  sleep 0.2
done
out=$(k get queues -o wide 2>&1) || fail "kubectl get queues -o wide: $out"
head -1 <<<"$out" | grep -q "AGE *PRIORITY *SHARE *ACTIVE *BORROWED *BORROWING-LIMIT *LENDING-LIMIT" ||
  fail "kubectl get queues -o wide columns: $out"
echo "$out" | row lab | grep -Eq " 3 [0-9.<>]+ true 0 gpu:4 - " || fail "kubectl get queues -o wide row: $out"

# Events in kubectl's own columns (short name ev).
out=$(k get ev -n team-a) || fail "kubectl get ev: $out"
echo "$out" | head -1 | tr -s ' ' | grep -qx "LAST SEEN TYPE REASON OBJECT MESSAGE" ||
  fail "kubectl get ev columns: $out"
echo "$out" | tr -s ' ' | grep -q " Normal Started workload/w1 running on $node" ||
  fail "kubectl get ev rows: $out"

# Node allocations: what each node's work holds.
out=$(k get nodeallocations "$node") || fail "kubectl get nodeallocations: $out"
echo "$out" | tr -s ' ' | grep -q "^$node 2 0 " || fail "kubectl get nodeallocations: $out"

# A missing object is said missing, not its tenant (kubectl reads the namespace after a 404).
out=$(k get wl nosuch -n team-a 2>&1) && fail "kubectl get wl nosuch succeeded: $out"
echo "$out" | grep -q "NotFound" && ! echo "$out" | grep -q "namespaces" ||
  fail "kubectl get wl nosuch: $out"

# Watching one object starts from it as it is now, not its history (kubectl asks from 0).
k get wl w1 -n team-a -w >"$tmp/watch1.txt" 2>&1 &
watcher=$!
sleep 2
kill $watcher 2>/dev/null || true
if grep -q "Scheduled\|Pending" "$tmp/watch1.txt"; then
  fail "kubectl get wl w1 -w replayed w1's history: $(cat "$tmp/watch1.txt")"
fi
grep -q "^w1 .*Running" "$tmp/watch1.txt" || fail "kubectl get wl w1 -w: $(cat "$tmp/watch1.txt")"

# The objects themselves, where kubectl asks for them.
[ "$(k get wl w1 -n team-a -o name)" = "workload.fabrica.dev/w1" ] || fail "kubectl -o name"
[ "$(k get wl w1 -n team-a -o jsonpath='{.spec.podSets[0].count}')" = 2 ] || fail "kubectl -o jsonpath"

# A watch: the list's rows, then a row for each change.
k get wl -n team-a -w >"$tmp/watch.txt" 2>&1 &
watcher=$!
for _ in $(seq 50); do grep -q "^w1 " "$tmp/watch.txt" && break; sleep 0.2; done
workload w2 | "$FABCTL" apply -f - >/dev/null || fail "apply w2"
for _ in $(seq 50); do grep -q "^w2 .*Running" "$tmp/watch.txt" && break; sleep 0.2; done
kill $watcher 2>/dev/null || true
grep -q "^w2 .*Running" "$tmp/watch.txt" || fail "kubectl get -w: $(cat "$tmp/watch.txt")"
[ "$(grep -c "^NAME " "$tmp/watch.txt")" = 1 ] || fail "kubectl get -w headers: $(cat "$tmp/watch.txt")"
echo "kubectl_table_test: OK"
