#!/usr/bin/env bash
# `fabctl top nodes` shows the room held for pending work: a workload of 8 GPUs that waited past
# --reserve-after plans on a node (Slurm's backfill reservation), and top shows which workload
# plans there, with when it starts by the time limits of the work there, and each of that node's
# GPUs that frees as used+held (0+1000), with the node's HELD total. A running workload's describe says when it reaches its time
# limit.
# Usage: fabctl_top_test.sh FABRICA_BIN FABCTL_BIN SOURCE_DIR
set -euo pipefail
FABRICA=$1
FABCTL=$2
source "$(dirname "$0")/factory_lib.sh"
fail() { echo "FAIL: $*"; tail -5 "$tmp/up.log"; exit 1; }
start_factory --reserve-after 5
export FABRICA_CONFIG="$tmp/data/fabctl.yaml"
[ -s "$FABRICA_CONFIG" ] || fail "no fabctl config from fabrica up"

# With no queue at all, fabctl pending says so and lists what waits (an unplaceable gang here).
out=$("$FABCTL" pending) || fail "pending with no queues: $out"
grep -q "^No queues exist" <<<"$out" && grep -q "^Nothing waits" <<<"$out" || fail "pending, nothing: $out"
cat >"$tmp/huge.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: huge, namespace: team-a}
spec:
  gang: true
  podSets: [{name: main, count: 6, cpu: "1", memory: 1Gi, devices: {gpus: 8, models: H100}}]
  run: {command: [train], durationSeconds: 60}
YAML
"$FABCTL" apply -f "$tmp/huge.yaml" >/dev/null || fail "apply huge"
for _ in $(seq 50); do
  out=$("$FABCTL" pending)
  grep -q "^team-a *huge .*the whole fleet, even empty, holds only 5" <<<"$out" && break
  sleep 0.2
done
# (Never placeable, even with no queue: 6 pods of 8 H100s, and 5 nodes of whole H100s.)
grep -q "^team-a *huge *0 .*needs 6 pods of 8 GPUs; the whole fleet, even empty, holds only 5" <<<"$out" ||
  fail "pending with no queues: $out"
"$FABCTL" get workloads -n team-a | contains "^huge *Unschedulable " ||
  fail "huge not Unschedulable: $("$FABCTL" get workloads -n team-a)"
# describe names the nodes that take no new work, which its wait for room does not count.
first=$("$FABCTL" get nodes --no-headers | awk 'NR == 1 {print $1}')
"$FABCTL" cordon "$first" >/dev/null || fail "cordon $first"
[ "$first" = h200-0 ] || fail "the first node is $first, not h200-0"
# (A pair of 8-GPU H200 pods: the fleet's two H200 nodes hold it, one is cordoned.)
cat >"$tmp/pair.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: pair, namespace: team-a}
spec:
  gang: true
  podSets: [{name: main, count: 2, cpu: "1", memory: 1Gi, devices: {gpus: 8, models: H200}}]
  run: {command: [train], durationSeconds: 60}
YAML
"$FABCTL" apply -f "$tmp/pair.yaml" >/dev/null || fail "apply pair"
for _ in $(seq 50); do
  "$FABCTL" get workloads -n team-a | contains "^pair *Pending .*room" && break
  sleep 0.2
done
"$FABCTL" describe workload pair -n team-a | contains "^Not counted: $first (cordoned) — nodes that take no new work now$" ||
  fail "describe of pair with $first cordoned: $("$FABCTL" describe workload pair -n team-a)"
# (huge never fits, even on the fleet empty: every node is counted.)
if "$FABCTL" describe workload huge -n team-a | contains "^Not counted"; then
  fail "describe of huge, which no fleet holds, with $first cordoned: $("$FABCTL" describe workload huge -n team-a)"
fi
"$FABCTL" delete workload pair -n team-a >/dev/null || fail "delete pair"
# kubectl's selection and output: --field-selector (checked by the server: a field a kind is not
# selected by, or a value its field never has, is refused by name), -o jsonpath, -o
# custom-columns, --sort-by (cores as numbers: "32" before "224").
out=$("$FABCTL" get nodes --field-selector spec.unschedulable=true -o name) || fail "cordoned: $out"
[ "$out" = "node/$first" ] || fail "nodes selected as cordoned: $out"
out=$("$FABCTL" get workloads -A --field-selector status.phase=Pending \
  -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}') ||
  fail "pending by field: $out"
[ "$out" = "team-a/huge" ] || fail "workloads selected as Pending: $out"
out=$("$FABCTL" get workloads -A --field-selector status.phase=Running,metadata.namespace=team-a \
  -o jsonpath='{.items[*].metadata.name}') || fail "running by field: $out"
[ -z "$out" ] || fail "workloads selected as Running: $out"
# (An index past the end is an error, as kubectl's, not an empty answer.)
rc=0
out=$("$FABCTL" get workloads -A --field-selector status.phase=Running \
  -o jsonpath='{.items[0].metadata.name}' 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -q "array index out of bounds: index 0, length 0" <<<"$out" ||
  fail "items[0] of none (rc $rc): $out"
out=$("$FABCTL" get workloads -A --field-selector status.phase=pending 2>&1) &&
  fail "a phase in lower case was taken: $out"
grep -q "status.phase is one of Pending, Scheduled, Running" <<<"$out" || fail "lower case: $out"
out=$("$FABCTL" get workloads -A --field-selector spec.gpus=8 2>&1) && fail "spec.gpus taken: $out"
grep -q "not selected by 'spec.gpus'.*status.assignments.node" <<<"$out" || fail "spec.gpus: $out"
out=$("$FABCTL" get nodes --sort-by .spec.cpu --no-headers \
  -o custom-columns=NODE:.metadata.name,CPU:.spec.cpu,OFF:.spec.unschedulable) ||
  fail "custom columns: $out"
[ "$(sort -s -n -k2,2 <<<"$out")" = "$out" ] || fail "not sorted by cores: $out"
[ "$(awk '{print $2}' <<<"$out" | sort -u | wc -l)" -gt 1 ] || fail "one core count only: $out"
contains "^$first  *[0-9]*  *true$" <<<"$out" || fail "cordoned node's row: $out"
# A watch on a selection reopened (quiet for --request-timeout) is told of what changed outside
# it since (the server cannot know whether the list it follows showed it): fabctl shows no
# deletion of what it never showed.
timeout 4 "$FABCTL" --request-timeout 1 get workloads -A -w --field-selector status.phase=Running \
  -o name >"$tmp/selwatch.txt" 2>&1 &
sleep 0.5
"$FABCTL" patch workload huge -n team-a -p '{"metadata": {"labels": {"seen": "no"}}}' >/dev/null ||
  fail "label huge"
wait $! || true
[ ! -s "$tmp/selwatch.txt" ] || fail "a watch of Running work showed: $(cat "$tmp/selwatch.txt")"
out=$("$FABCTL" get nodes -o 'jsonpath={.items[0].metadata.name' 2>&1) && fail "bad template: $out"
grep -q "is not closed" <<<"$out" || fail "bad template: $out"
"$FABCTL" uncordon "$first" >/dev/null || fail "uncordon $first"
"$FABCTL" delete workload huge -n team-a >/dev/null || fail "delete huge"

cat >"$tmp/queue.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Queue
metadata: {name: team-a}
spec:
  quotas:
    gpu: {guaranteed: 58}
YAML
"$FABCTL" apply -f "$tmp/queue.yaml" >/dev/null || fail "apply queue"
# Every whole H100 of the factory busy (5 nodes of 8), for hours of virtual time, with limits.
for i in $(seq 0 39); do
  cat <<YAML
---
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: small-$i, namespace: team-a}
spec:
  podSets: [{name: main, count: 1, cpu: "1", memory: 1Gi, devices: {gpus: 1, models: H100}}]
  run: {command: [train], durationSeconds: $((36000 + i * 60))}
  maxRuntimeSeconds: 72000
YAML
done >"$tmp/small.yaml"
"$FABCTL" apply -f "$tmp/small.yaml" >/dev/null || fail "apply small"
running=0
for _ in $(seq 100); do
  running=$("$FABCTL" get workloads -n team-a | grep -c " Running " || true)
  [ "$running" = 40 ] && break
  sleep 0.2
done
[ "$running" = 40 ] || fail "$running of 40 small workloads running: $("$FABCTL" get workloads -n team-a)"
# A running workload with a time limit says when it reaches it (squeue's end time).
described=$("$FABCTL" describe workload small-7 -n team-a)
admitted=$("$FABCTL" get workload small-7 -n team-a -o json | grep -o '"scheduledTime": "[^"]*"' | cut -d'"' -f4)
[ -n "$admitted" ] || fail "small-7 has no scheduledTime"
ends=$(date -u -d "$(sed 's/\.\([0-9]*\)Z$/ UTC/' <<<"$admitted") + 72000 seconds" +%Y-%m-%dT%H:%M:%S)
grep -q "^Ends by: *$ends\.[0-9]*Z (its time limit, 72000 s from its admission)$" <<<"$described" ||
  fail "no end by the limit ($ends, admitted $admitted): $described"
top=$("$FABCTL" top nodes)
grep -q "^NODE *GPUS *ALLOC *HELD " <<<"$top" || fail "no HELD column: $top"
grep -q "Held for pending work" <<<"$top" && fail "room held with nothing pending: $top"

cat >"$tmp/big.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: big, namespace: team-a}
spec:
  podSets: [{name: main, count: 1, cpu: "8", memory: 8Gi, devices: {gpus: 8, models: H100}}]
  run: {command: [train], durationSeconds: 600}
YAML
"$FABCTL" apply -f "$tmp/big.yaml" >/dev/null || fail "apply big"
for _ in $(seq 100); do
  "$FABCTL" get workload big -n team-a -o yaml | contains "reason: Reserved" && break
  sleep 0.2
done
big=$("$FABCTL" get workload big -n team-a -o json)
grep -q '"reason": "Reserved"' <<<"$big" || fail "big reserved nothing: $big"
node=$(grep -o '"node": "[^"]*"' <<<"$big" | head -1 | cut -d'"' -f4)
[ -n "$node" ] || fail "no node in big's nomination: $big"
top=$("$FABCTL" top nodes)
# Its node: 8 GPUs in use (all their memory too), none free to hold yet; the holder named,
# with its planned GPUs.
grep -q "^$node *8 *8.00 *0.00 *\([0-9]*Gi\)/\1 *1000 1000 1000 1000 1000 1000 1000 1000$" <<<"$top" ||
  fail "$node before any GPU frees: $top"
grep -q "^  team-a/big (Reserved, starts by 20[0-9-]*T[0-9:.]*Z): $node GPU 0,1,2,3,4,5,6,7 (held as they free)$" <<<"$top" ||
  fail "the holder not named: $top"
# Two of the work there deleted: their GPUs are free, and held for big (0+1000), and on no
# other node.
for victim in $("$FABCTL" get workloads -n team-a | awk -v n="$node" '$2 == "Running" && $5 == n {print $1}' | head -2); do
  "$FABCTL" delete workload "$victim" -n team-a >/dev/null || fail "delete $victim"
done
for _ in $(seq 100); do
  top=$("$FABCTL" top nodes)
  grep -q "^$node *8 *6.00 *2.00 " <<<"$top" && break
  sleep 0.2
done
grep -q "^$node *8 *6.00 *2.00 " <<<"$top" || fail "$node's freed GPUs not held: $top"
[ "$(grep -o '0+1000' <<<"$top" | wc -l)" = 2 ] || fail "held GPUs shown: $top"
[ "$(grep -c '[0-9]+[0-9]' <<<"$top")" = 1 ] || fail "room held on other nodes too: $top"
# Another tenant reads the same load (a sum, from the server), not team-a's work: a node busy
# with others' work is not shown idle to it.
bob=$(grep -o 'token: [0-9a-f]*, user: bob}' "$tmp/data/auth.yaml" | cut -d' ' -f2 | tr -d ,)
[ -n "$bob" ] || fail "no token for bob in auth.yaml"
top=$("$FABCTL" --token "$bob" top nodes) || fail "bob's top nodes: $top"
grep -q "^$node *8 *6.00 *2.00 " <<<"$top" || fail "$node as bob reads it: $top"
grep -q "^Other tenants' work, which you cannot read, holds [0-9.]* GPUs of these" <<<"$top" ||
  fail "bob's top does not say others' work is counted: $top"
! grep -q "team-a/" <<<"$top" || fail "bob's top names team-a's work: $top"
# One node named, as kubectl's `top node NAME`; a node that does not exist is an error.
out=$("$FABCTL" top nodes "$node" --no-headers) || fail "top nodes $node: $out"
[ "$(grep -v '^ \|^$\|^Held for\|^Other tenants' <<<"$out" | awk '{print $1}')" = "$node" ] ||
  fail "top nodes $node: $out"
rc=0
out=$("$FABCTL" top nodes nosuch 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -q "Node 'nosuch' not found" <<<"$out" || fail "top nodes nosuch (rc $rc): $out"
# --sort-by, as kubectl top's: the most GPUs allocated first (the node above, 6 of 8, before
# any node with fewer), the most free first (an idle node before it); anything else is refused.
out=$("$FABCTL" top nodes --no-headers --sort-by gpu) || fail "top --sort-by gpu: $out"
allocs=$(awk '/^[^ ]/ && NF >= 4 && $3 ~ /^[0-9.]+$/ {print $3}' <<<"$out")
[ -n "$allocs" ] && [ "$allocs" = "$(sort -rn <<<"$allocs")" ] || fail "top --sort-by gpu not by ALLOC: $out"
[ "$(head -1 <<<"$out" | awk '{print $3}')" = "$(sort -rn <<<"$allocs" | head -1)" ] || fail "top --sort-by gpu: $out"
# (Free counts GPUs in service on nodes taking work: an idle node cordoned is not the most free.)
idle=$("$FABCTL" top nodes --no-headers | awk '/^[^ ]/ && NF >= 4 && $3 == "0.00" && $4 == "0.00" {print $1}' | head -1)
[ -n "$idle" ] || fail "no idle node: $("$FABCTL" top nodes)"
"$FABCTL" cordon "$idle" >/dev/null || fail "cordon $idle"
out=$("$FABCTL" top nodes --no-headers --sort-by free) || fail "top --sort-by free: $out"
"$FABCTL" uncordon "$idle" >/dev/null || fail "uncordon $idle"
free=$(awk -v idle="$idle" '/^[^ ]/ && NF >= 4 && $3 ~ /^[0-9.]+$/ && $1 != idle {printf "%.2f\n", $2 - $3 - $4}' <<<"$out")
[ "$free" = "$(sort -rn <<<"$free")" ] || fail "top --sort-by free not by free GPUs: $out"
[ "$(awk '/^[^ ]/ {print $1}' <<<"$out" | head -1)" != "$idle" ] || fail "cordoned $idle sorted most free: $out"
grep -q "^$idle .* (cordoned)$" <<<"$out" || fail "cordoned $idle not said so: $out"
rc=0
out=$("$FABCTL" top nodes --sort-by cpu 2>&1) || rc=$?
[ "$rc" = 2 ] && grep -q "'cpu' is not one of gpu, memory, free" <<<"$out" || fail "top --sort-by cpu (rc $rc): $out"
out=$("$FABCTL" --token "$bob" describe node "$node") || fail "bob's describe node: $out"
grep -q "^  (others) *(not yours to read) *6 " <<<"$out" && grep -q "^Allocated:  6 of 8 GPUs" <<<"$out" ||
  fail "bob's describe node $node: $out"
# A JSON manifest with an error is told as malformed JSON, where it is; a misspelt field is
# refused with a guess at what it misspells.
printf '{"apiVersion": "fabrica.dev/v1", "kind": "Workload"\n "metadata": {}}\n' >"$tmp/bad.json"
out=$("$FABCTL" apply -f "$tmp/bad.json" 2>&1) && fail "bad.json applied: $out"
grep -q "bad.json: malformed JSON: parse error at line 2, column 11" <<<"$out" ||
  fail "bad.json's error: $out"
# A document that does not say its apiVersion is refused, as kubectl's validation refuses it.
printf 'kind: Queue\nmetadata: {name: noversion}\nspec: {}\n' >"$tmp/noversion.yaml"
rc=0
out=$("$FABCTL" apply -f "$tmp/noversion.yaml" 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -q "noversion.yaml: noversion: apiVersion not set" <<<"$out" ||
  fail "noversion.yaml (rc $rc): $out"
"$FABCTL" get queue noversion >/dev/null 2>&1 && fail "noversion was created"
# (In a YAML stream whose first document is a flow map, an error in a later one is YAML's.)
printf '{apiVersion: fabrica.dev/v1, kind: Queue, metadata: {name: q1}}\n---\nkind: Queue\nmetadata: {name: q2\n' >"$tmp/multi.yaml"
out=$("$FABCTL" apply -f "$tmp/multi.yaml" 2>&1) && fail "multi.yaml applied: $out"
grep -q "multi.yaml:[0-9]*: malformed YAML" <<<"$out" || fail "multi.yaml's error: $out"
# (The first document only; awk reads all of sed's output, so sed never writes to a closed pipe.)
sed 's/maxRuntimeSeconds: 72000/maxRuntimeSecond: 72000/; s/name: small-0,/name: typo,/' "$tmp/small.yaml" |
  awk '/^---$/ && n++ {done = 1} !done {print}' >"$tmp/typo.yaml"
out=$("$FABCTL" apply -f "$tmp/typo.yaml" 2>&1) && fail "typo.yaml applied: $out"
grep -q "spec.maxRuntimeSecond: unknown field (did you mean maxRuntimeSeconds?)" <<<"$out" ||
  fail "typo.yaml's error: $out"
# A word that is no command is named, as kubectl's "unknown command" (rc 1).
rc=0
out=$("$FABCTL" foo 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -q '^fabctl: unknown command "foo" (fabctl --help lists the commands)$' <<<"$out" ||
  fail "an unknown command (rc $rc): $out"
# delete --all, as kubectl's: every workload of the tenant named, and only with a tenant named.
rc=0
out=$("$FABCTL" delete workloads --all 2>&1) || rc=$?
[ "$rc" = 2 ] && grep -q "name the tenant (-n TENANT)" <<<"$out" || fail "delete --all with no tenant (rc $rc): $out"
out=$("$FABCTL" delete workloads --all -n team-a) || fail "delete --all: $out"
[ "$(grep -c "^workloads/.* deleted$" <<<"$out")" = 39 ] || fail "delete --all deleted: $out"
left=$("$FABCTL" get workloads -n team-a 2>&1)
grep -q "No resources found" <<<"$left" || fail "left after delete --all: $left"
# delete queues --all: children before their parents, the built-in unqueued kept (or gone with
# the last queue before its turn came).
printf 'apiVersion: fabrica.dev/v1\nkind: Queue\nmetadata: {name: dept}\n---\napiVersion: fabrica.dev/v1\nkind: Queue\nmetadata: {name: dept-x}\nspec: {parent: dept}\n' >"$tmp/tree.yaml"
"$FABCTL" apply -f "$tmp/tree.yaml" >/dev/null || fail "apply tree.yaml"
out=$("$FABCTL" delete queues --all 2>&1) || fail "delete queues --all: $out"
grep -q "^queues/dept-x deleted" <<<"$out" && grep -q "^queues/dept deleted" <<<"$out" &&
  grep -q "^queues/team-a deleted" <<<"$out" && grep -q "^queues/unqueued \(kept (built in)\|already gone\)" <<<"$out" ||
  fail "delete queues --all: $out"
[ "$(grep -n "dept" <<<"$out" | head -1 | grep -c "dept-x")" = 1 ] || fail "a parent before its child: $out"
# A memory-only share takes the compute its memory is of the GPU it gets (12Gi of a 141Gi H200:
# 85m), and get workloads shows that; waiting, the memory it asks.
cat >"$tmp/kv.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: kv, namespace: team-a}
spec:
  podSets: [{name: main, count: 1, cpu: "1", memory: 1Gi, devices: {gpuMemory: 12Gi, models: H200}}]
  run: {command: [serve], durationSeconds: 600}
YAML
"$FABCTL" apply -f "$tmp/kv.yaml" >/dev/null || fail "apply kv"
for _ in $(seq 50); do
  out=$("$FABCTL" get workloads -n team-a)
  grep -q "^kv *Running " <<<"$out" && break
  sleep 0.2
done
grep -q "^kv *Running *1 *0.085 " <<<"$out" || fail "kv's GPUS: $out"
"$FABCTL" get workload kv -n team-a -o json | tr -d ' \n' | contains '"gpuMilli":85,' ||
  fail "kv's share: $("$FABCTL" get workload kv -n team-a -o json)"
# A tenant given exclusiveNodes while its pods share a node with another tenant's is warned that
# nothing running moves.
cat >"$tmp/beside.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: beside, namespace: partner-x}
spec:
  podSets: [{name: main, count: 1, cpu: "1", memory: 1Gi, devices: {gpus: 1, models: H200}}]
  run: {command: [train], durationSeconds: 600}
YAML
"$FABCTL" apply -f "$tmp/beside.yaml" >/dev/null || fail "apply beside"
for _ in $(seq 50); do
  out=$("$FABCTL" get workloads -A)
  grep -q "^partner-x *beside *\(Scheduled\|Running\) " <<<"$out" && break
  sleep 0.2
done
kv_node=$(awk '$2 == "kv" {print $6}' <<<"$out")
beside_node=$(awk '$2 == "beside" {print $6}' <<<"$out")
[ -n "$kv_node" ] && [ "$kv_node" = "$beside_node" ] || fail "kv and beside not on one node: $out"
# The GPU memory they hold there: top's GPU-MEMORY counts kv's 12Gi and beside's whole 141Gi
# of the node's eight 141Gi GPUs, and describe node lists each.
"$FABCTL" top nodes | contains "^$kv_node .* 153Gi/1128Gi " || fail "top's GPU memory: $("$FABCTL" top nodes)"
described=$("$FABCTL" describe node "$kv_node")
grep -q "^  team-a  *kv  *Running  *1  *0.085  *12Gi$" <<<"$described" &&
  grep -q "^  partner-x  *beside  *[A-Za-z]*  *1  *1  *141Gi$" <<<"$described" &&
  grep -q "^Allocated:  1.085 of 8 GPUs, 153Gi of 1128Gi of GPU memory$" <<<"$described" ||
  fail "describe node's GPU memory: $described"
# The rest of kv's GPU is kept by isolation for team-a's kind of sharer, not free to all: top
# marks it `~` and names for whom; describe node says so per GPU.
top=$("$FABCTL" top nodes)
grep -q "^$kv_node .* 85~" <<<"$top" &&
  grep -q "^~ isolation keeps the free room of that GPU for some tenants only:$" <<<"$top" &&
  grep -q "^  \(tenant team-a\|trust domain [a-z-]*\): $kv_node GPU [0-9]$" <<<"$top" ||
  fail "top's kept room: $top"
grep -q "^Open only to (isolation by trust):$" <<<"$described" &&
  grep -q "^  gpu[0-9] (0.915 free): \(tenant team-a\|trust domain [a-z-]*\)$" <<<"$described" ||
  fail "describe node's kept room: $described"
printf 'apiVersion: fabrica.dev/v1\nkind: Tenant\nmetadata: {name: partner-x}\nspec: {trust: untrusted, exclusiveNodes: true}\n' >"$tmp/excl.yaml"
out=$("$FABCTL" apply -f "$tmp/excl.yaml" 2>&1) || fail "apply excl.yaml: $out"
grep -q "^tenants/partner-x configured" <<<"$out" &&
  grep -q "^Warning: tenant partner-x's pods already run beside other tenants' on 1 node(s) ($kv_node): exclusiveNodes keeps others off the nodes its pods land on from now on; nothing running is moved$" <<<"$out" ||
  fail "no warning for exclusiveNodes on a shared node: $out"
# ... and that its running work is charged as exclusiveNodes counts it from the next cycle; said
# once: applied again, it is no news.
grep -q "^Warning: tenant partner-x's 1 running workload(s) are charged as exclusiveNodes counts them from the next scheduling cycle" <<<"$out" ||
  fail "no warning of exclusiveNodes' charge: $out"
printf 'apiVersion: fabrica.dev/v1\nkind: Tenant\nmetadata: {name: partner-x}\nspec: {trust: untrusted, exclusiveNodes: true, trustDomain: partner-x}\n' >"$tmp/excl2.yaml"
out=$("$FABCTL" apply -f "$tmp/excl2.yaml" 2>&1) || fail "apply excl2.yaml: $out"
if grep -q "are charged as exclusiveNodes counts them" <<<"$out"; then
  fail "exclusiveNodes' charge said again: $out"
fi
# A queue that drops a tenant while its work runs there: the work runs on, charged to unqueued,
# and describe says which queue it is charged to and why (before, it named the old queue).
printf 'apiVersion: fabrica.dev/v1\nkind: Queue\nmetadata: {name: pool}\nspec: {tenants: [team-c], quotas: {gpu: {guaranteed: 2}}}\n' >"$tmp/pool.yaml"
"$FABCTL" apply -f "$tmp/pool.yaml" >/dev/null || fail "apply pool.yaml"
cat >"$tmp/pooled.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: pooled, namespace: team-c}
spec:
  queue: pool
  podSets: [{name: main, count: 1, cpu: "1", memory: 1Gi, devices: {gpus: 1, models: L4}}]
  run: {command: [train], durationSeconds: 360000}
YAML
"$FABCTL" apply -f "$tmp/pooled.yaml" >/dev/null || fail "apply pooled"
for _ in $(seq 50); do
  "$FABCTL" describe workload pooled -n team-c | contains "^Charged:    1 GPUs of queue pool's quota$" && break
  sleep 0.2
done
"$FABCTL" describe workload pooled -n team-c | contains "^Charged:    1 GPUs of queue pool's quota$" ||
  fail "pooled's charge: $("$FABCTL" describe workload pooled -n team-c)"
"$FABCTL" patch queue pool -p '{"spec": {"tenants": ["team-b"]}}' >/dev/null || fail "patch pool"
for _ in $(seq 50); do
  "$FABCTL" describe workload pooled -n team-c | contains "^Charged:    1 GPUs of queue unqueued's quota since [0-9T:.Z-]* (tenant team-c may no longer use queue pool: it runs on in unqueued)$" && break
  sleep 0.2
done
"$FABCTL" describe workload pooled -n team-c | contains "^Charged:    1 GPUs of queue unqueued's quota since [0-9T:.Z-]* (tenant team-c may no longer use queue pool: it runs on in unqueued)$" ||
  fail "pooled's charge once team-c left pool: $("$FABCTL" describe workload pooled -n team-c)"
"$FABCTL" get workloads -n team-c -o wide | contains "^pooled .* unqueued(was:pool) " ||
  fail "get -o wide's QUEUE for pooled: $("$FABCTL" get workloads -n team-c -o wide)"
# A root that holds GPUs past its guarantee (a queue within its own guarantee took GPUs no tree
# is guaranteed rather than reclaim what its sibling borrows) says where they come from.
cat >"$tmp/root.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Queue
metadata: {name: rr}
spec: {quotas: {gpu: {guaranteed: 0.2}}}
---
apiVersion: fabrica.dev/v1
kind: Queue
metadata: {name: rx}
spec: {parent: rr, tenants: [team-c], quotas: {gpu: {guaranteed: 0.1}}}
---
apiVersion: fabrica.dev/v1
kind: Queue
metadata: {name: ry}
spec: {parent: rr, tenants: [team-c], quotas: {gpu: {guaranteed: 0.1}}}
YAML
"$FABCTL" apply -f "$tmp/root.yaml" >/dev/null || fail "apply root.yaml"
# (Shares: the gpu flavour's, wherever they land; the h200 flavour takes whole H200s only.)
for w in "y-0 ry 200m" "x-0 rx 100m"; do
  read -r wname wqueue wgpus <<<"$w"
  printf 'apiVersion: fabrica.dev/v1\nkind: Workload\nmetadata: {name: %s, namespace: team-c}\nspec:\n  queue: %s\n  podSets: [{name: main, count: 1, cpu: "1", memory: 1Gi, devices: {gpuMilli: %s}}]\n  run: {command: [train], durationSeconds: 360000}\n' \
    "$wname" "$wqueue" "$wgpus" >"$tmp/$wname.yaml"
  "$FABCTL" apply -f "$tmp/$wname.yaml" >/dev/null || fail "apply $wname"
  for _ in $(seq 100); do
    "$FABCTL" get workloads -n team-c | contains "^$wname  *Running" && break
    sleep 0.2
  done
  "$FABCTL" get workloads -n team-c | contains "^$wname  *Running" ||
    fail "$wname not running: $("$FABCTL" describe workload "$wname" -n team-c | head -8)"
done
for _ in $(seq 50); do
  "$FABCTL" describe queue rr | contains "^  (a root borrows from no queue above it" && break
  sleep 0.2
done
"$FABCTL" describe queue rr | contains "^  (a root borrows from no queue above it: these are GPUs no tree is guaranteed" ||
  fail "a root's borrowed GPUs unexplained: $("$FABCTL" describe queue rr; "$FABCTL" get workloads -n team-c)"
# A node's manifest applied over the registered node: the built-in labels a read shows are not
# kept as another writer's (no warning), and a node read and applied back is unchanged.
node=$("$FABCTL" get nodes | awk 'NR==2 {print $1}')
"$FABCTL" get node "$node" -o json | python3 -c '
import json, sys
n = json.load(sys.stdin)
labels = {k: v for k, v in n["metadata"].get("labels", {}).items() if "/" not in k}
print(json.dumps({"apiVersion": n["apiVersion"], "kind": "Node", "metadata": {"name": n["metadata"]["name"], "labels": labels}, "spec": n["spec"]}))' >"$tmp/node.json"
out=$("$FABCTL" apply -f "$tmp/node.json" 2>&1) || fail "apply node $node: $out"
! grep -q "kubernetes.io/hostname\|fabrica.dev/gpu-model" <<<"$out" || fail "apply node kept the built-in labels: $out"
"$FABCTL" get node "$node" -o json | contains '"fabrica.dev/gpu-model": "' || fail "node $node shows no GPU model label"
# A manifest that gives its resourceVersion is applied against it, as kubectl's apply: an old
# copy applied after another change is refused (409), not applied over it.
"$FABCTL" get tenant team-a -o yaml >"$tmp/tenant-old.yaml" || fail "get tenant team-a"
grep -q "resourceVersion:" "$tmp/tenant-old.yaml" || fail "no resourceVersion: $(cat "$tmp/tenant-old.yaml")"
"$FABCTL" patch tenant team-a -p '{"metadata": {"labels": {"edited": "first"}}}' >/dev/null || fail "patch tenant"
rc=0
out=$("$FABCTL" apply -f "$tmp/tenant-old.yaml" 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -q "409" <<<"$out" || fail "stale apply (rc $rc): $out"
"$FABCTL" get tenant team-a -o yaml | contains "edited: first" || fail "the stale apply undid the patch"
sed -i '/resourceVersion:/d' "$tmp/tenant-old.yaml"
"$FABCTL" apply -f "$tmp/tenant-old.yaml" >/dev/null 2>&1 || fail "apply without a resourceVersion"
# (What it keeps as applied leaves out what the server owns, which `get -o yaml` carries.)
kept=$("$FABCTL" get tenant team-a -o json | python3 -c '
import json, sys
t = json.load(sys.stdin)
print(t["metadata"]["annotations"]["fabrica.dev/last-applied-configuration"])')
grep -q '"name":"team-a"' <<<"$kept" && ! grep -q 'uid\|creationTimestamp\|"status"' <<<"$kept" ||
  fail "last-applied keeps server fields: $kept"
# `fabctl taint`, as kubectl's: a taint is added, shown by describe node, refused twice without
# --overwrite, removed with KEY-; work that does not tolerate it waits, naming it.
node=$("$FABCTL" get nodes | awk 'NR==2 {print $1}')
"$FABCTL" taint node "$node" dedicated=ops:NoSchedule | contains "node/$node tainted" || fail "taint $node"
"$FABCTL" describe node "$node" | contains "^Taints: *dedicated=ops:NoSchedule$" ||
  fail "describe node shows no taint: $("$FABCTL" describe node "$node" | head -6)"
"$FABCTL" get nodes -o wide | contains "^$node .* dedicated=ops:NoSchedule$" ||
  fail "get nodes -o wide shows no taint: $("$FABCTL" get nodes -o wide | head -3)"
rc=0
"$FABCTL" taint node "$node" dedicated=other:NoSchedule >"$tmp/taint2.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] && contains "already has a taint dedicated:NoSchedule (--overwrite replaces it)" "$tmp/taint2.txt" ||
  fail "a second taint of the same key and effect (rc $rc): $(cat "$tmp/taint2.txt")"
printf 'apiVersion: fabrica.dev/v1\nkind: Workload\nmetadata: {name: pinned, namespace: team-a}\nspec:\n  nodeSelector: {kubernetes.io/hostname: %s}\n  podSets: [{name: main, count: 1, cpu: "1", memory: 1Gi, devices: {gpus: 1}}]\n  run: {command: [train], durationSeconds: 360000}\n' \
  "$node" >"$tmp/pinned.yaml"
"$FABCTL" apply -f "$tmp/pinned.yaml" >/dev/null || fail "apply pinned"
for _ in $(seq 50); do
  "$FABCTL" get workloads -n team-a | contains "^pinned .*want of a toleration for taint dedicated=ops:NoSchedule" && break
  sleep 0.2
done
"$FABCTL" get workloads -n team-a | contains "^pinned .*want of a toleration for taint dedicated=ops:NoSchedule" ||
  fail "a workload kept off by a taint does not say so: $("$FABCTL" get workloads -n team-a)"
"$FABCTL" taint node "$node" dedicated- | contains "node/$node untainted" || fail "untaint $node"
"$FABCTL" describe node "$node" | contains "^Taints: *<none>$" || fail "taint not removed"
for _ in $(seq 50); do
  "$FABCTL" get workloads -n team-a | contains "^pinned  *Running" && break
  sleep 0.2
done
"$FABCTL" get workloads -n team-a | contains "^pinned  *Running" ||
  fail "pinned did not start once untainted: $("$FABCTL" get workloads -n team-a)"
echo "OK: top nodes shows the room held for a reservation, and whose; describe says when a limit ends a run; malformed JSON and a misspelt field are named; delete --all; a memory-only share's GPUS and GPU memory on its node; exclusiveNodes on a shared node warned; a running workload whose tenant its queue dropped says it is charged to unqueued; a root holding GPUs no tree is guaranteed says so; fabctl taint adds, shows (describe, get -o wide) and removes a taint, and work it keeps off says so"
