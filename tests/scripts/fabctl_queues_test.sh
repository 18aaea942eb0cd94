#!/usr/bin/env bash
# The queue commands as a user runs them, with the real binaries against `fabrica up`: apply
# examples/queues.yaml (twice: the second apply changes nothing and says so; a third with a
# changed queue updates that queue only), fill team-b past its share, then
# `fabctl get queues` shows the queues active and `fabctl pending research` lists what waits,
# in order, with why. A workload naming a queue its tenant may not use is refused (403).
# examples/flavors.yaml's flavours show the GPUs charged to them and cannot be deleted in use.
# An elastic gang (minCount) starts with the pods its queue allows, shown as PODS 2/4, and
# grows to all 4 when its queue may hold more, and gives one pod back for urgent work of its
# queue; a queue's flavorOrder decides where its work goes first. Files list queues in any
# order; a parent, and a bad name, are refused.
# `fabctl patch` changes a queue (JSON or YAML, "(no change)" when it changes nothing, an
# unknown field refused) and a workload's status; `fabctl describe queue` reads as a table.
# Usage: fabctl_queues_test.sh FABRICA_BIN FABCTL_BIN SOURCE_DIR
set -euo pipefail
FABRICA=$1
FABCTL=$2
SRC=$3
source "$(dirname "$0")/factory_lib.sh"
fail() { echo "FAIL: $*"; tail -5 "$tmp/up.log"; exit 1; }
start_factory
export FABRICA_CONFIG="$tmp/data/fabctl.yaml"
[ -s "$FABRICA_CONFIG" ] || fail "no fabctl config from fabrica up"

"$FABCTL" apply -f "$SRC/examples/queues.yaml" >"$tmp/apply1.txt" || fail "first apply"
"$FABCTL" apply -f "$SRC/examples/queues.yaml" >"$tmp/apply2.txt" 2>&1 || fail "second apply: $(cat "$tmp/apply2.txt")"
grep -q "queues/team-b created" "$tmp/apply1.txt" || fail "team-b not created: $(cat "$tmp/apply1.txt")"
grep -q "queues/team-b unchanged" "$tmp/apply2.txt" ||
  fail "second apply of the same file did not say unchanged: $(cat "$tmp/apply2.txt")"
sed 's/disruptionBudget: 2 /disruptionBudget: 3 /' "$SRC/examples/queues.yaml" >"$tmp/queues3.yaml"
"$FABCTL" apply -f "$tmp/queues3.yaml" >"$tmp/apply3.txt" 2>&1 || fail "third apply: $(cat "$tmp/apply3.txt")"
grep -q "queues/team-b configured" "$tmp/apply3.txt" ||
  fail "an apply that changes team-b did not update it: $(cat "$tmp/apply3.txt")"
grep -q "queues/team-a unchanged" "$tmp/apply3.txt" ||
  fail "team-a changed by an apply that does not touch it: $(cat "$tmp/apply3.txt")"
"$FABCTL" get queue team-b -o yaml | contains "disruptionBudget: 3" ||
  fail "team-b's new budget not stored: $("$FABCTL" get queue team-b -o yaml)"

# As kubectl's apply, a re-apply leaves alone the spec fields it never set: an admin's
# stopPolicy, written straight through the API (as `kubectl patch` would), stays; one an
# earlier apply set and the file no longer has goes.
# A dry run of a patch, client or server, says what it would do and changes nothing; the
# server's refuses what the write would.
for mode in client server; do
  patched=$("$FABCTL" patch queue team-b --dry-run=$mode -p '{"spec": {"stopPolicy": "Hold"}}') ||
    fail "patch --dry-run=$mode of team-b"
  want="queues/team-b patched (dry run)"
  [ $mode = client ] || want="queues/team-b patched (server dry run)"
  [ "$patched" = "$want" ] || fail "patch --dry-run=$mode said: $patched"
done
if "$FABCTL" get queue team-b -o yaml | contains "stopPolicy"; then
  fail "a dry-run patch changed team-b: $("$FABCTL" get queue team-b -o yaml)"
fi
rc=0
"$FABCTL" patch queue team-b --dry-run=server -p '{"spec": {"weight": -1}}' >"$tmp/drypatch.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "weight" "$tmp/drypatch.txt" ||
  fail "a server dry run of a bad patch (rc $rc): $(cat "$tmp/drypatch.txt")"
patched=$("$FABCTL" patch queue team-b -p '{"spec": {"stopPolicy": "Hold"}}') ||
  fail "admin patch of team-b"
[ "$patched" = "queues/team-b patched" ] || fail "patch said: $patched"
patched=$("$FABCTL" patch queue team-b -p 'spec: {stopPolicy: Hold}') || fail "YAML patch"
[ "$patched" = "queues/team-b patched (no change)" ] || fail "a patch that changes nothing: $patched"
rc=0
"$FABCTL" patch queue team-b -p '{"spec": {"stopPolicyy": "Hold"}}' >"$tmp/badpatch.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "spec.stopPolicyy: unknown field" "$tmp/badpatch.txt" ||
  fail "a patch with an unknown field (rc $rc): $(cat "$tmp/badpatch.txt")"
"$FABCTL" apply -f "$tmp/queues3.yaml" >"$tmp/apply4.txt" 2>&1 || fail "fourth apply: $(cat "$tmp/apply4.txt")"
grep -q "queues/team-b unchanged" "$tmp/apply4.txt" ||
  fail "a re-apply changed team-b: $(cat "$tmp/apply4.txt")"
"$FABCTL" get queue team-b -o yaml | contains "stopPolicy: Hold" ||
  fail "a re-apply undid the admin's stopPolicy: $("$FABCTL" get queue team-b -o yaml)"
sed 's/^  disruptionBudget: 3 .*/&\n  stopPolicy: HoldAndDrain/' "$tmp/queues3.yaml" >"$tmp/queues5.yaml"
grep -q "stopPolicy: HoldAndDrain" "$tmp/queues5.yaml" || fail "queues5.yaml: $(cat "$tmp/queues5.yaml")"
"$FABCTL" apply -f "$tmp/queues5.yaml" >/dev/null 2>&1 || fail "fifth apply"
"$FABCTL" get queue team-b -o yaml | contains "stopPolicy: HoldAndDrain" || fail "stopPolicy not applied"
"$FABCTL" apply -f "$tmp/queues3.yaml" >/dev/null 2>&1 || fail "sixth apply"
if "$FABCTL" get queue team-b -o yaml | contains "stopPolicy"; then
  fail "a field the last apply set and the file dropped stayed: $("$FABCTL" get queue team-b -o yaml)"
fi
# ... at any depth: an admin's lendingLimit patched under quotas.gpu stays through a re-apply of
# the file (a trial's emergency limit vanished), and one an apply set goes once the file drops it.
"$FABCTL" patch queue team-b -p '{"spec": {"quotas": {"gpu": {"lendingLimit": 4}}}}' >/dev/null ||
  fail "admin patch of team-b's lendingLimit"
"$FABCTL" apply -f "$tmp/queues3.yaml" >"$tmp/apply7.txt" 2>&1 || fail "seventh apply: $(cat "$tmp/apply7.txt")"
grep -q "queues/team-b unchanged" "$tmp/apply7.txt" ||
  fail "a re-apply changed team-b's quotas: $(cat "$tmp/apply7.txt")"
"$FABCTL" get queue team-b -o yaml | contains "lendingLimit: 4" ||
  fail "a re-apply undid the admin's lendingLimit: $("$FABCTL" get queue team-b -o yaml)"
sed 's/quotas: {gpu: {guaranteed: 16}}/quotas: {gpu: {guaranteed: 16, lendingLimit: 8}}/' \
  "$tmp/queues3.yaml" >"$tmp/queues8.yaml"
"$FABCTL" apply -f "$tmp/queues8.yaml" >/dev/null 2>&1 || fail "eighth apply"
"$FABCTL" get queue team-b -o yaml | contains "lendingLimit: 8" || fail "lendingLimit not applied"
"$FABCTL" apply -f "$tmp/queues3.yaml" >/dev/null 2>&1 || fail "ninth apply"
if "$FABCTL" get queue team-b -o yaml | contains "lendingLimit"; then
  fail "a nested field the last apply set and the file dropped stayed: $("$FABCTL" get queue team-b -o yaml)"
fi
# Labels and annotations too: one added by patch stays through a re-apply (a trial saw it
# dropped), one an apply set goes once the file drops it.
"$FABCTL" patch queue team-b -p '{"metadata": {"labels": {"owner": "ops"}, "annotations": {"note": "keep"}}}' >/dev/null ||
  fail "patch team-b's labels"
sed 's/^metadata: {name: team-b}$/metadata: {name: team-b, labels: {tier: gold}}/' \
  "$tmp/queues3.yaml" >"$tmp/queues10.yaml"
grep -q "tier: gold" "$tmp/queues10.yaml" || fail "queues10.yaml: $(cat "$tmp/queues10.yaml")"
"$FABCTL" apply -f "$tmp/queues10.yaml" >/dev/null 2>&1 || fail "tenth apply"
"$FABCTL" apply -f "$tmp/queues3.yaml" >/dev/null 2>&1 || fail "eleventh apply"
labels=$("$FABCTL" get queue team-b -o json)
contains '"owner": "ops"' <<<"$labels" && contains '"note": "keep"' <<<"$labels" ||
  fail "a re-apply dropped a label or annotation added by patch: $labels"
if contains '"tier"' <<<"$labels"; then fail "a label the file dropped stayed: $labels"; fi

# A class that lists its tenants is theirs alone: team-b naming team-a's is refused, naming it.
"$FABCTL" get pc >"$tmp/pc.txt" 2>&1 || fail "get pc: $(cat "$tmp/pc.txt")"
grep -q "^serving-critical *1000 *team-a " "$tmp/pc.txt" || fail "get pc: $(cat "$tmp/pc.txt")"
grep -q "^urgent *100 *\* " "$tmp/pc.txt" || fail "get pc: $(cat "$tmp/pc.txt")"
cat >"$tmp/critical.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: sneaky, namespace: team-b}
spec:
  priorityClassName: serving-critical
  podSets: [{name: main, count: 1, devices: {gpus: 1}}]
YAML
if "$FABCTL" apply -f "$tmp/critical.yaml" >"$tmp/critical.txt" 2>&1; then fail "team-b used team-a's class"; fi
grep -q "(403): .*tenant team-b may not use priority class 'serving-critical' (its spec.tenants: team-a)" \
  "$tmp/critical.txt" || fail "the refusal: $(cat "$tmp/critical.txt")"

# A dry run (kubectl's --dry-run=server) says what the server would do and writes nothing;
# what it would refuse it refuses; --dry-run=client asks the server nothing but what is there.
sed 's/disruptionBudget: 3 /disruptionBudget: 4 /' "$tmp/queues3.yaml" >"$tmp/queues-dry.yaml"
"$FABCTL" apply -f "$tmp/queues-dry.yaml" --dry-run=server >"$tmp/dry.txt" 2>&1 || fail "dry run: $(cat "$tmp/dry.txt")"
grep -q "queues/team-b configured (server dry run)" "$tmp/dry.txt" || fail "dry run: $(cat "$tmp/dry.txt")"
grep -q "queues/team-a unchanged (server dry run)" "$tmp/dry.txt" || fail "dry run: $(cat "$tmp/dry.txt")"
"$FABCTL" get queue team-b -o yaml | contains "disruptionBudget: 3" || fail "a dry run wrote team-b"
"$FABCTL" apply -f "$tmp/queues-dry.yaml" --dry-run=client >"$tmp/dry.txt" 2>&1 || fail "client dry run"
grep -q "queues/team-b configured (dry run)" "$tmp/dry.txt" || fail "client dry run: $(cat "$tmp/dry.txt")"
sed 's/disruptionBudget: 3 /disruptionBudget: -4 /' "$tmp/queues3.yaml" >"$tmp/queues-dry.yaml"
if "$FABCTL" apply -f "$tmp/queues-dry.yaml" --dry-run=server >"$tmp/dry.txt" 2>&1; then
  fail "a dry run passed what the server refuses: $(cat "$tmp/dry.txt")"
fi
grep -q "(422): queues/team-b .*disruptionBudget" "$tmp/dry.txt" || fail "dry run refusal: $(cat "$tmp/dry.txt")"
"$FABCTL" delete queue team-c --dry-run=server >"$tmp/dry.txt" 2>&1 || fail "dry delete: $(cat "$tmp/dry.txt")"
grep -q "queues/team-c deleted (server dry run)" "$tmp/dry.txt" || fail "dry delete: $(cat "$tmp/dry.txt")"
"$FABCTL" get queue team-c >/dev/null 2>&1 || fail "a dry run deleted team-c"

# A file whose second document is refused names that document; the first is still applied.
cat >"$tmp/typo.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Queue
metadata: {name: fine}
spec: {weight: 1}
---
apiVersion: fabrica.dev/v1
kind: Queue
metadata: {name: typo}
spec: {weigth: 1}
YAML
if "$FABCTL" apply -f "$tmp/typo.yaml" >"$tmp/typo.txt" 2>&1; then fail "a typo was applied"; fi
grep -q "queues/fine created" "$tmp/typo.txt" || fail "the good document: $(cat "$tmp/typo.txt")"
grep -q "(422): queues/typo ($tmp/typo.yaml): .*spec.weigth: unknown field" "$tmp/typo.txt" ||
  fail "the refusal does not name the document: $(cat "$tmp/typo.txt")"
"$FABCTL" delete queue fine >/dev/null || fail "delete fine"

# Aliases nested to name a billion values (a trial's 452-byte file took every byte of memory)
# are refused, naming file and line, at once; nothing is sent.
{
  printf 'apiVersion: fabrica.dev/v1\nkind: Queue\nmetadata: {name: bomb}\nspec:\n'
  printf '  a: &a "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"\n'
  prev=a
  for k in b c d e f g h i; do
    printf '  %s: &%s [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n' $k $k $prev $prev $prev $prev $prev $prev $prev $prev $prev $prev
    prev=$k
  done
} >"$tmp/bomb.yaml"
# (A time limit, not a memory one: sanitizers reserve terabytes of address space.)
if timeout 60 "$FABCTL" apply -f "$tmp/bomb.yaml" >"$tmp/bomb.txt" 2>&1; then fail "an alias bomb was applied"; fi
grep -q "bomb.yaml:[0-9]*: malformed YAML: its aliases repeat more values than the text could hold" "$tmp/bomb.txt" ||
  fail "the alias bomb: $(cat "$tmp/bomb.txt")"
if "$FABCTL" get queue bomb >/dev/null 2>&1; then fail "the alias bomb's queue exists"; fi

# team-b may hold what research lends it (40 GPUs): six 8-GPU workloads leave one or more waiting.
for i in 1 2 3 4 5 6; do
  cat <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: big-$i, namespace: team-b}
spec:
  podSets: [{name: main, count: 1, cpu: "8", memory: 32Gi, devices: {gpus: 8}}]
  run: {command: [train], durationSeconds: 3600}
---
YAML
done >"$tmp/big.yaml"
# Watched as they are created and scheduled: one header (with an EVENT column), then rows.
timeout 4 "$FABCTL" get workloads -A -w >"$tmp/watch.txt" 2>&1 &
watch_pid=$!
sleep 0.5
"$FABCTL" apply -f "$tmp/big.yaml" >/dev/null || fail "apply workloads"

pending=""
for _ in $(seq 100); do  # until the scheduler has looked at it
  pending=$("$FABCTL" pending research)
  grep "big-6" <<<"$pending" | grep -q "to lend" && break
  sleep 0.2
done
grep -q "big-6" <<<"$pending" || fail "big-6 not listed as pending: $pending"
head -1 <<<"$pending" | grep -q "^POSITION *QUEUE *IN-QUEUE" || fail "no header: $pending"
grep "big-6" <<<"$pending" | grep -q "team-b" || fail "big-6 not in team-b: $pending"
grep "big-6" <<<"$pending" | grep -q "to lend" || fail "big-6 does not say why it waits: $pending"
# A queue where nothing waits says so, not a bare header.
quiet=$("$FABCTL" pending partner-x 2>&1) || fail "pending partner-x: $quiet"
[ "$quiet" = "Nothing waits in queue partner-x." ] || fail "pending of a quiet queue: $quiet"
# With no queue named: every tree's.
every=$("$FABCTL" pending 2>&1) || fail "pending with no queue: $every"
grep "big-6" <<<"$every" | grep -q "team-b" || fail "pending with no queue lacks big-6: $every"
# Global flags after the subcommand, as kubectl takes them: this token is the one sent.
wrong=$("$FABCTL" get nodes --token not-a-token 2>&1) && fail "a wrong token after the subcommand was not sent: $wrong"
grep -q "(401)" <<<"$wrong" || fail "a token after the subcommand: $wrong"

wait "$watch_pid" || true
head -1 "$tmp/watch.txt" | grep -q "^EVENT *NAMESPACE *NAME *PHASE" || fail "watch header: $(cat "$tmp/watch.txt")"
[ "$(grep -c "NAMESPACE" "$tmp/watch.txt")" = 1 ] || fail "watch repeats its header: $(cat "$tmp/watch.txt")"
grep -q "^ADDED *team-b *big-1 *Pending" "$tmp/watch.txt" || fail "watch: no ADDED row: $(cat "$tmp/watch.txt")"
grep -q "^MODIFIED *team-b *big-1 *Scheduled" "$tmp/watch.txt" || fail "watch: no MODIFIED row: $(cat "$tmp/watch.txt")"
# A watch on a quiet tenant stays open past the client's timeout (it reopens from the last
# version it saw) until it is stopped: `timeout` ends it (124), not an error of its own (1).
rc=0
timeout 5 "$FABCTL" --request-timeout 1 get workloads -n team-c -w >"$tmp/quiet.txt" 2>&1 || rc=$?
[ "$rc" = 124 ] || fail "a quiet watch ended by itself (rc $rc): $(cat "$tmp/quiet.txt")"
# One name with -w watches that workload alone (it printed it once and returned), and what is
# there goes out at once, into a file too.
rc=0
timeout 3 "$FABCTL" get workload big-1 -n team-b -w >"$tmp/one.txt" 2>&1 || rc=$?
[ "$rc" = 124 ] && grep -q "^ADDED *big-1 " "$tmp/one.txt" && ! grep -q "big-2" "$tmp/one.txt" ||
  fail "a watch of one workload (rc $rc): $(cat "$tmp/one.txt")"
queues=$("$FABCTL" get queues)
grep -q "ACTIVE" <<<"$queues" || fail "no ACTIVE column: $queues"
grep -q "USED *SHARE *PENDING" <<<"$queues" || fail "no SHARE column: $queues"
grep "^team-b " <<<"$queues" | grep -q "true" || fail "team-b not active: $queues"
# -o wide adds what a queue borrows and its limits, as `kubectl describe clusterqueue` shows them.
wide=$("$FABCTL" get queues -o wide)
head -1 <<<"$wide" | grep -q "WEIGHT *PRIORITY *GUARANTEED *USED *BORROWED *BORROWING-LIMIT *LENDING-LIMIT *DISRUPTION-BUDGET *COST-BUDGET *SHARE" ||
  fail "queues' wide header: $wide"
grep "^team-a " <<<"$wide" | grep -q " gpu:16 *- *- " || fail "team-a's limits: $wide"
grep "^team-c " <<<"$wide" | grep -q " - *gpu:6 *- " || fail "team-c's limits: $wide"
# Several names, as kubectl takes them: one table; one not found is an error (exit 1), the
# others still shown.
two=$("$FABCTL" get queues team-a team-c) || fail "get two queues: $two"
[ "$(grep -c "^team-[ac] " <<<"$two")" = 2 ] && [ "$(grep -c "^NAME" <<<"$two")" = 1 ] ||
  fail "get two queues: $two"
rc=0
some=$("$FABCTL" get queues team-a no-such 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -q "^team-a " <<<"$some" && grep -q "no-such" <<<"$some" ||
  fail "get a queue and a missing one (rc $rc): $some"
# A workload named without -n: the tenant of the one of that name the user may read is taken
# (get, describe); a name none has asks for -n.
bob=$(grep "token: .*user: bob}" "$tmp/data/auth.yaml" | sed 's/.*token: \([0-9a-f]*\),.*/\1/')
[ -n "$bob" ] || fail "no token for bob: $(cat "$tmp/data/auth.yaml")"
"$FABCTL" --token "$bob" get workload big-1 --no-headers | grep -q "^big-1 " ||
  fail "bob's get without -n: $("$FABCTL" --token "$bob" get workload big-1 2>&1)"
"$FABCTL" --token "$bob" describe workload big-1 | grep -q "^Tenant: *team-b" ||
  fail "bob's describe without -n: $("$FABCTL" --token "$bob" describe workload big-1 2>&1)"
# Another tenant's view of the queue says what waits there that it may not read.
alice=$(grep "token: .*user: alice}" "$tmp/data/auth.yaml" | sed 's/.*token: \([0-9a-f]*\),.*/\1/')
for _ in $(seq 20); do
  n=$("$FABCTL" pending research 2>/dev/null | grep -c " team-b " || true)
  mine=$("$FABCTL" --token "$alice" pending research 2>&1) || fail "alice's pending: $mine"
  [ "$n" -gt 0 ] && [ "$mine" = "$n workload(s) wait, none of a tenant you may read." ] && break
done
[ "$mine" = "$n workload(s) wait, none of a tenant you may read." ] ||
  fail "alice's pending research ($n of team-b's waiting): $mine"
rc=0
asked=$("$FABCTL" get workload no-such 2>&1) || rc=$?
[ "$rc" = 2 ] && grep -q "give -n TENANT" <<<"$asked" || fail "get of no workload without -n (rc $rc): $asked"
# Queues by their parent: research's children, not the built-in unqueued (a trial saw it in
# every selection).
kids=$("$FABCTL" get queues --field-selector spec.parent=research -o name) || fail "by parent: $kids"
[ "$kids" = "$(printf 'queue/team-a\nqueue/team-b')" ] || fail "research's children: $kids"
out=$("$FABCTL" get queues --field-selector metadata.name=nope -o name) || fail "no queue: $out"
[ -z "$out" ] || fail "a selection of no queue: $out"
out=$("$FABCTL" get tenants --field-selector spec.trust=bogus 2>&1) && fail "spec.trust=bogus: $out"
grep -q "spec.trust is one of trusted, standard, untrusted" <<<"$out" || fail "bogus trust: $out"
out=$("$FABCTL" get queues --sort-by .spec.quotas 2>&1) && fail "sorted by an object: $out"
grep -q "selects a list or an object, which does not sort" <<<"$out" || fail "unsortable: $out"
bare=$("$FABCTL" get queues --no-headers) || fail "get --no-headers: $bare"
grep -q "^team-a " <<<"$bare" && ! grep -q "NAME" <<<"$bare" || fail "get --no-headers: $bare"
[ "$("$FABCTL" get queues team-a team-c -o json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["kind"], len(d["items"]))')" = "List 2" ] ||
  fail "get two queues -o json is not a List of 2"

# Work no quota could ever admit says so in the table, not just Pending: six 8-GPU pods at once
# is more than team-b may ever hold (40 GPUs).
cat >"$tmp/huge.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: huge, namespace: team-b}
spec:
  gang: true
  podSets: [{name: main, count: 6, cpu: "8", memory: 32Gi, devices: {gpus: 8}}]
YAML
"$FABCTL" apply -f "$tmp/huge.yaml" >/dev/null || fail "apply huge"
huge=""
for _ in $(seq 100); do
  huge=$("$FABCTL" get workloads -n team-b)
  grep -q "^huge *Unschedulable" <<<"$huge" && break
  sleep 0.2
done
grep -q "^huge *Unschedulable" <<<"$huge" || fail "huge not shown Unschedulable: $huge"
# `describe` shows the phase as `get` does, with status.phase beside it.
described=$("$FABCTL" describe workload huge -n team-b)
grep -q "^Phase: *Unschedulable (status.phase Pending)$" <<<"$described" ||
  fail "describe's phase differs from get's: $described"
# What happened to it: its events, in `describe` and `get events`.
grep -q "^Events:" <<<"$described" && grep -Eq "^ +Warning +Unschedulable " <<<"$described" ||
  fail "describe shows no events: $described"
events=$("$FABCTL" get events huge -n team-b)
grep -Eq "^LAST SEEN +TYPE +REASON +OBJECT +MESSAGE" <<<"$events" &&
  grep -Eq " Normal +Created +workload/huge " <<<"$events" ||
  fail "get events: $events"
"$FABCTL" delete workload huge -n team-b >/dev/null || fail "delete huge"
# A workload set inactive shows so (as a gang past its requeue limit does), not as Pending; short
# resource names work as kubectl's.
cat >"$tmp/parked.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: parked, namespace: team-b}
spec:
  active: false
  podSets: [{name: main, count: 1, cpu: "1", memory: 1Gi, devices: {gpus: 1}}]
  run: {command: [train], durationSeconds: 60}
YAML
"$FABCTL" apply -f "$tmp/parked.yaml" >/dev/null || fail "apply parked"
for _ in $(seq 50); do
  parked=$("$FABCTL" get wl parked -n team-b)
  grep -q "^parked *Inactive" <<<"$parked" && break
  sleep 0.2
done
grep -q "^parked *Inactive" <<<"$parked" || fail "parked not shown Inactive: $parked"
"$FABCTL" delete workload parked -n team-b >/dev/null || fail "delete parked"
"$FABCTL" get q | sed -n 1p | contains "^NAME" || fail "get q: $("$FABCTL" get q 2>&1)"

cat >"$tmp/other.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: sneaky, namespace: team-c}
spec:
  queue: team-b
  podSets: [{name: main, count: 1, cpu: "1", memory: 1Gi, devices: {gpus: 1}}]
YAML
if "$FABCTL" apply -f "$tmp/other.yaml" >"$tmp/other.txt" 2>&1; then
  fail "team-c could name team-b's queue: $(cat "$tmp/other.txt")"
fi
grep -q "403" "$tmp/other.txt" && grep -q "may not use queue team-b" "$tmp/other.txt" ||
  fail "refusal does not say why: $(cat "$tmp/other.txt")"
# -n naming another tenant than the file's object writes nothing (kubectl refuses it too).
if "$FABCTL" apply -f "$tmp/other.yaml" -n team-b >"$tmp/other.txt" 2>&1; then
  fail "apply -n team-b of a team-c object: $(cat "$tmp/other.txt")"
fi
grep -q "sneaky: the tenant of the object, 'team-c', is not the tenant -n names, 'team-b'" \
  "$tmp/other.txt" || fail "the -n mismatch is not named: $(cat "$tmp/other.txt")"
if "$FABCTL" delete -f "$tmp/other.yaml" -n team-b >"$tmp/other.txt" 2>&1; then
  fail "delete -f -n team-b of a team-c object: $(cat "$tmp/other.txt")"
fi
# Flavours: the H200s counted apart for team-c; the scheduler writes each flavour's GPUs.
"$FABCTL" apply -f "$SRC/examples/flavors.yaml" >"$tmp/flavors.txt" 2>&1 ||
  fail "apply flavors: $(cat "$tmp/flavors.txt")"
flavors=""
for _ in $(seq 100); do
  flavors=$("$FABCTL" get resourceflavors)
  grep "^h200 " <<<"$flavors" | grep -q " 16 " && grep "^mig " <<<"$flavors" | grep -q " 8 " && break
  sleep 0.2
done
head -1 <<<"$flavors" | grep -q "^NAME *KIND *MODELS *MIG-PROFILES *GPUS" || fail "no header: $flavors"
grep "^h200 " <<<"$flavors" | grep -q "whole *H200 .* 16 " || fail "h200 not 16 H200s: $flavors"
grep "^mig " <<<"$flavors" | grep -q " 8 " || fail "mig not the 8 MIG GPUs: $flavors"
# GUARANTEED by flavour where a queue is guaranteed more than one (a trial read 8 H100s and
# three MIG slices summed as one number).
teamc=""
for _ in $(seq 100); do
  teamc=$("$FABCTL" get queue team-c)
  grep -q "^team-c .* gpu:12,h200:8 " <<<"$teamc" && break
  sleep 0.2
done
grep -q "^team-c .* gpu:12,h200:8 " <<<"$teamc" || fail "team-c's GUARANTEED by flavour: $teamc"
# ... and USED and BORROWED beside it in the same form, though only gpu is used (a trial read
# USED "1" beside GUARANTEED "gpu:12,h200:8").
cat >"$tmp/one.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: one, namespace: team-c}
spec:
  podSets: [{name: main, count: 1, cpu: "1", memory: 1Gi, devices: {gpus: 1}}]
YAML
"$FABCTL" apply -f "$tmp/one.yaml" >/dev/null || fail "apply one"
for _ in $(seq 100); do
  teamc=$("$FABCTL" get queue team-c -o wide)
  grep -q "^team-c .* gpu:12,h200:8 *gpu:1 *0 " <<<"$teamc" && break
  sleep 0.2
done
grep -q "^team-c .* gpu:12,h200:8 *gpu:1 *0 " <<<"$teamc" || fail "team-c's USED by flavour: $teamc"
"$FABCTL" delete workload one -n team-c >/dev/null || fail "delete one"
# The pending list still reads the tree once quotas name stored flavours.
pending=$("$FABCTL" pending research 2>&1) || fail "pending fails with flavours: $pending"
head -1 <<<"$pending" | grep -Eq "^POSITION|^Nothing waits in queue research" ||
  fail "pending with flavours: $pending"
if "$FABCTL" delete resourceflavor h200 >"$tmp/del.txt" 2>&1; then
  fail "a flavour in use was deleted"
fi
grep -q "team-c" "$tmp/del.txt" || fail "refusal does not name the queue: $(cat "$tmp/del.txt")"
# team-c's flavorOrder puts its work on the other GPUs before its H200s (packing alone picks
# an H200 node here).
# (Several names at once, as kubectl takes them.)
"$FABCTL" delete workload big-1 big-2 big-3 big-4 big-5 big-6 -n team-b >"$tmp/del6.txt" 2>&1 ||
  fail "delete big-1 … big-6: $(cat "$tmp/del6.txt")"
[ "$(grep -c "^workloads/big-[1-6] deleted$" "$tmp/del6.txt")" = 6 ] || fail "delete six: $(cat "$tmp/del6.txt")"
for _ in $(seq 100); do
  "$FABCTL" get workloads -n team-b | contains "^big-" || break
  sleep 0.2
done
# GPUS names MIG slices by their profile: two 3g.40gb pods are 2x3g.40gb (a trial read them as
# 0.856 GPUs, their compute slices out of 7 as quotas charge them).
cat >"$tmp/slices.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: slices, namespace: team-c}
spec:
  podSets: [{name: main, count: 2, cpu: "1", memory: 1Gi, devices: {mig: 3g.40gb}}]
YAML
"$FABCTL" apply -f "$tmp/slices.yaml" >/dev/null || fail "apply slices"
slices=$("$FABCTL" get workload slices -n team-c)
grep "^slices " <<<"$slices" | grep -q " 2x3g.40gb " || fail "GPUS of two 3g.40gb slices: $slices"
# -o wide adds the queue it waits in, its priority and creation, as kubectl's wide output adds
# columns.
wide=$("$FABCTL" get workloads -n team-c -o wide)
head -1 <<<"$wide" | grep -q "^NAME *PHASE *PODS *GPUS *NODES *QUEUE *PRIORITY *CREATED *MESSAGE" ||
  fail "wide header: $wide"
# (slices names no queue: it waits in its tenant's, team-c.)
grep "^slices " <<<"$wide" | grep -q " team-c *0 *20[0-9][0-9]-" || fail "wide row: $wide"
# -o name prints kind/name, one a line, as kubectl's; an output format fabctl does not know is
# a usage error (exit 1), not the table.
[ "$("$FABCTL" get workloads -n team-c -o name)" = "workload/slices" ] ||
  fail "-o name: $("$FABCTL" get workloads -n team-c -o name)"
rc=0
"$FABCTL" get queues -o 'go-template={{.items}}' >"$tmp/badout.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "is not one of json, yaml, wide, name, jsonpath=" "$tmp/badout.txt" ||
  fail "an unknown -o gave rc $rc: $(cat "$tmp/badout.txt")"
"$FABCTL" delete workload slices -n team-c >/dev/null || fail "delete slices"
# Nothing to list: no header, and kubectl's "No resources found" on standard error.
empty=$("$FABCTL" get workloads -n team-c 2>"$tmp/empty.err")
[ -z "$empty" ] && grep -q "^No resources found in tenant team-c.$" "$tmp/empty.err" ||
  fail "an empty list: '$empty' / $(cat "$tmp/empty.err")"
# A watch in JSON is one event a line from the start (what is there first as ADDED).
timeout 2 "$FABCTL" get queues -w -o json >"$tmp/watch.json" 2>/dev/null || true
head -1 "$tmp/watch.json" | grep -q '^{"object":{.*"kind":"Queue".*},"type":"ADDED"}$' ||
  fail "watch -o json's first line: $(head -c 300 "$tmp/watch.json")"
cat >"$tmp/ordered.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: ordered, namespace: team-c}
spec:
  podSets: [{name: main, count: 1, cpu: "8", memory: 32Gi, devices: {gpus: 2}}]
  run: {command: [train], durationSeconds: 3600}
YAML
"$FABCTL" apply -f "$tmp/ordered.yaml" >/dev/null || fail "apply ordered"
ordered=""
for _ in $(seq 100); do
  ordered=$("$FABCTL" get workload ordered -n team-c -o json)
  tr -d ' \n' <<<"$ordered" | grep -q '"assignments":\[{' && break
  sleep 0.2
done
tr -d ' \n' <<<"$ordered" | grep -q '"node":"hgx-' ||
  fail "team-c's work not on the other GPUs first: $ordered"
# Partial admission: partner-x may hold 8 GPUs, so an elastic gang of four 4-GPU pods
# (minCount 1) starts with 2 of them, and `fabctl get workloads` says so.
cat >"$tmp/elastic.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: elastic, namespace: partner-x}
spec:
  gang: true
  podSets: [{name: main, count: 4, minCount: 1, cpu: "4", memory: 16Gi, devices: {gpus: 4}}]
  run: {command: [train], durationSeconds: 3600}
YAML
"$FABCTL" apply -f "$tmp/elastic.yaml" >/dev/null || fail "apply elastic"
workloads=""
for _ in $(seq 100); do
  workloads=$("$FABCTL" get workloads -n partner-x)
  grep "^elastic " <<<"$workloads" | grep -q " 2/4 " && break
  sleep 0.2
done
grep "^elastic " <<<"$workloads" | grep -q " 2/4 *8 " || fail "elastic not 2 of 4 pods: $workloads"
# Its two pods' 8 cores count against partner-x's CPU quota (examples/queues.yaml: 64).
queue=""
for _ in $(seq 100); do
  queue=$("$FABCTL" get queue partner-x -o json)
  tr -d ' \n' <<<"$queue" | grep -q '"cpu":{"guaranteed":"64","used":"8"}' && break
  sleep 0.2
done
tr -d ' \n' <<<"$queue" | grep -q '"cpu":{"guaranteed":"64","used":"8"}' ||
  fail "partner-x's CPU not in its status: $queue"
# ... and, once its pods run, why it grows no more.
for _ in $(seq 100); do
  described=$("$FABCTL" describe workload elastic -n partner-x)
  grep -q "^Growth: " <<<"$described" && break
  sleep 0.2
done
grep -q "^Admitted: *2 pod(s) per pod set (partial admission)" <<<"$described" ||
  fail "describe: $described"
grep -q "^Growth: *not now: its queue's GPU quota holds no more of its pods" <<<"$described" ||
  fail "describe says not why elastic grows not: $described"
# partner-x may hold 16 GPUs now: the elastic gang takes its other two pods (elastic growth).
cat >"$tmp/partner.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Queue
metadata: {name: partner-x}
spec:
  quotas:
    gpu: {guaranteed: 16, borrowingLimit: 0}
    cpu: {guaranteed: 64}
YAML
"$FABCTL" apply -f "$tmp/partner.yaml" >/dev/null || fail "apply partner-x at 16"
for _ in $(seq 100); do
  workloads=$("$FABCTL" get workloads -n partner-x)
  grep "^elastic " <<<"$workloads" | grep -q "Running *4 *16 " && break
  sleep 0.2
done
# (Its message says how it grew until its new pods start, then where it runs.)
grep "^elastic " <<<"$workloads" |
  grep -q "Running *4 *16 .*\(all 4 pods admitted (2 added as room freed)\|running on \)" ||
  fail "elastic did not grow to 4 pods: $workloads"
described=$("$FABCTL" describe workload elastic -n partner-x)
grep -q "^Resized: *at " <<<"$described" || fail "describe shows no growth: $described"
# An edit that would leave partner-x holding more than its quotas is accepted with the server's
# warning (nothing running is evicted for it), printed as kubectl prints one; a dry run here.
for i in $(seq 100); do
  "$FABCTL" get queues | awk '$1 == "partner-x" && $5 == "16" {f = 1} END {exit !f}' && break
  [ "$i" = 100 ] && fail "partner-x's status never showed 16 GPUs used: $("$FABCTL" get queues)"
  sleep 0.2
done
sed 's/guaranteed: 16, borrowingLimit: 0/guaranteed: 12, borrowingLimit: 0/' "$tmp/partner.yaml" >"$tmp/partner12.yaml"
"$FABCTL" apply -f "$tmp/partner12.yaml" --dry-run=server >"$tmp/lowered.txt" 2>&1 || fail "dry-run apply at 12"
grep -q "^Warning: queue partner-x holds 16 GPUs of gpu, past its new guaranteed 12 GPUs + borrowingLimit 0 GPUs: nothing running is evicted for it" "$tmp/lowered.txt" ||
  fail "no warning for a quota under what the queue holds: $(cat "$tmp/lowered.txt")"
# Urgent work in partner-x, now at its quota: the elastic gang gives one pod for it (elastic
# shrink) rather than being evicted whole, and `fabctl describe` says which pod stops when.
cat >"$tmp/urgent.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: urgent, namespace: partner-x}
spec:
  priority: 100
  podSets: [{name: main, count: 1, cpu: "4", memory: 16Gi, devices: {gpus: 4}}]
  run: {command: [serve], durationSeconds: 3600}
YAML
"$FABCTL" apply -f "$tmp/urgent.yaml" >/dev/null || fail "apply urgent"
# (At x60 the grace period is half a second of wall time: on a busy machine the shrink may be
# done before a look finds it under way. Done, main-3 is gone from its assignments; its events
# still name it: "Shrinking: pod(s) main-3 taken".)
for _ in $(seq 100); do
  described=$("$FABCTL" describe workload elastic -n partner-x)
  grep -q "^Shrinking:\|^Admitted: *3 pod(s)" <<<"$described" && break
  sleep 0.2
done
grep -q "^Shrinking: *pod(s) main-3 stop at .*for higher-priority work" <<<"$described" ||
  { grep -q "^Admitted: *3 pod(s) per pod set (elastic: resized since it started)" <<<"$described" &&
    ! sed -n '/^Assignments:/,/^Spec:/p' <<<"$described" | grep -q "main-3"; } ||
  fail "elastic not shrunk for urgent work: $described $("$FABCTL" describe workload urgent -n partner-x)"
grep -q "^Preempted\|^Preemption" <<<"$described" && fail "elastic evicted whole: $described"
# An ended workload shows how many of its pods completed (as a Job's COMPLETIONS) and no GPUs.
cat >"$tmp/short.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: short, namespace: team-a}
spec:
  podSets: [{name: main, count: 2, cpu: "1", memory: 1Gi, devices: {gpus: 1}}]
  run: {command: [eval], durationSeconds: 60}
YAML
"$FABCTL" apply -f "$tmp/short.yaml" >/dev/null || fail "apply short"
for _ in $(seq 150); do
  workloads=$("$FABCTL" get workloads -n team-a)
  grep "^short " <<<"$workloads" | grep -q "Succeeded" && break
  sleep 0.2
done
grep "^short " <<<"$workloads" | grep -q "Succeeded *2/2 done *0 " ||
  fail "short's completed pods not shown: $workloads"
# `describe` shows a workload's record of evictions (status.evictions, the scheduler's): how
# often, the GPU-seconds they threw away, and the last one.
"$FABCTL" patch workload short -n team-a --subresource status -p \
  '{"status": {"evictions": {"count": 2, "gpuSecondsLost": 1200, "last": {"reason": "Preempted", "message": "preempted by hot (for higher-priority work)", "time": "2026-12-02T10:00:00Z"}}}}' ||
  fail "admin patch of short's status"
described=$("$FABCTL" describe workload short -n team-a)
grep -q "^Evicted: *2 time(s), 1200 GPU-seconds lost; last Preempted at 2026-12-02T10:00:00Z: preempted by hot" <<<"$described" ||
  fail "describe shows no eviction record: $described"
# `describe queue` reads as kubectl's describe does: its place in the tree, its policies, and
# per resource its quota beside what it holds.
described=$("$FABCTL" describe queue team-c)
grep -q "^Parent: *(none: the root of its tree)" <<<"$described" || fail "describe queue: $described"
grep -q "^  gpu (GPUs) *12 *- *6 *[0-9.]* *[0-9.]*$" <<<"$described" ||
  fail "describe queue shows no quota row: $described"
# The built-in unqueued is listed and described beside the stored queues.
"$FABCTL" get queues | contains "^unqueued " || fail "unqueued not listed: $("$FABCTL" get queues)"
described=$("$FABCTL" describe queue unqueued)
grep -q "^Built in: *work that names no queue" <<<"$described" || fail "describe unqueued: $described"
described=$("$FABCTL" describe queue team-b)
grep -q "^Parent: *research$" <<<"$described" && grep -q "^Disruption: *at most 3 " <<<"$described" &&
  grep -q "borrowWithinCohort LowerPriority (priority at most 0)" <<<"$described" ||
  fail "describe queue team-b: $described"
grep -q "^Tenants: *tenant team-b (named after it)" <<<"$described" || fail "team-b's tenant: $described"
# Its fair share says what its weighted share is made of.
grep -q "^            = (0.5 × share now [0-9.e-]* + 0.5 × usage history) / weight [0-9.]* (its share now: .*); work that fits within its queue's guarantee goes first, then, among siblings of the same over-quota priority, the lowest share$" <<<"$described" ||
  fail "team-b's weighted share unexplained: $described"
# research is named after no tenant and lists none: no tenant's work may name it.
described=$("$FABCTL" describe queue research)
grep -q "^Tenants: *none (no tenant is named research, none is listed)$" <<<"$described" ||
  fail "describe queue research: $described"
# A leaf says who may use it through the queues above it too (a trial read "none" of a leaf
# below its tenant's queue): research listing team-c lets team-c wait in team-b.
"$FABCTL" patch queue research -p '{"spec": {"tenants": ["team-c"]}}' >/dev/null || fail "patch research"
described=$("$FABCTL" describe queue team-b)
grep -q "^Tenants: *tenant team-b (named after it); listed by queue research: team-c$" <<<"$described" ||
  fail "team-b's tenants through research: $described"
"$FABCTL" patch queue research -p '{"spec": {"tenants": null}}' >/dev/null || fail "unpatch research"
# An over-quota priority and a weight of 0 (KAI's queue priority and overQuotaWeight 0) are
# stored and said; a queue of weight 0 has no weighted share to show.
"$FABCTL" patch queue team-b -p '{"spec": {"priority": 100, "weight": 0}}' >/dev/null || fail "patch team-b's priority"
described=$("$FABCTL" describe queue team-b)
grep -q "^Priority: *100 over quota (among its siblings, a higher priority takes idle GPUs past its guarantee first; siblings: team-a 0)$" <<<"$described" &&
  grep -q "^Weight: *0 (it takes idle GPUs past its guarantee only after its siblings" <<<"$described" ||
  fail "team-b's priority and weight 0: $described"
# Its sibling at the default priority 0 says so too, naming the sibling that goes first.
described=$("$FABCTL" describe queue team-a)
grep -q "^Priority: *0 over quota (among its siblings, a higher priority takes idle GPUs past its guarantee first; siblings: team-b 100)$" <<<"$described" ||
  fail "team-a's priority beside team-b's: $described"
# A department's policies hold for its leaves that set none (and its budget counts all theirs).
"$FABCTL" patch queue research -p '{"spec": {"queueingStrategy": "StrictFIFO", "preemption": {"reclaimWithinCohort": "Never"}, "disruptionBudget": 2}}' >/dev/null ||
  fail "patch research's policies"
described=$("$FABCTL" describe queue team-a)
grep -q "^Strategy: *StrictFIFO (from queue research above it)$" <<<"$described" &&
  grep -q "^Preemption: *withinQueue LowerPriority, reclaimWithinCohort Never, borrowWithinCohort Never (from queue research above it)$" <<<"$described" ||
  fail "team-a's policies from research: $described"
described=$("$FABCTL" describe queue research)
grep -q "^Disruption: *at most 2 of the workloads of the queues below it evicted at once$" <<<"$described" ||
  fail "research's budget: $described"
"$FABCTL" patch queue research -p '{"spec": {"queueingStrategy": null, "preemption": null, "disruptionBudget": null}}' >/dev/null ||
  fail "unpatch research's policies"
row=$("$FABCTL" get queues team-b -o wide --no-headers)
awk '{exit !($1 == "team-b" && $3 == "0" && $4 == "100")}' <<<"$row" || fail "team-b's WEIGHT and PRIORITY columns: $row"
"$FABCTL" patch queue team-b -p '{"spec": {"priority": null, "weight": null}}' >/dev/null || fail "unpatch team-b"
# A file may list a queue before its parent: fabctl applies parents first (the server refuses
# a queue whose parent does not exist) and deletes children first. A queue with a child, or a
# name that is no valid name, is refused naming why.
cat >"$tmp/tree.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Queue
metadata: {name: lab-child}
spec: {parent: lab}
---
apiVersion: fabrica.dev/v1
kind: Queue
metadata: {name: lab}
YAML
"$FABCTL" apply -f "$tmp/tree.yaml" >"$tmp/tree.txt" 2>&1 || fail "apply child before parent: $(cat "$tmp/tree.txt")"
# (lab has no spec, as a cohort-style parent: it is stored with an empty one, and listed.)
"$FABCTL" get queues -o wide >"$tmp/q.txt" 2>&1 && grep -q "^lab " "$tmp/q.txt" ||
  fail "get queues with a spec-less queue: $(cat "$tmp/q.txt")"
"$FABCTL" get queue lab -o json | contains '"spec": {}' || fail "lab's spec: $("$FABCTL" get queue lab -o json)"
if "$FABCTL" delete queue lab >"$tmp/del.txt" 2>&1; then fail "deleted a parent: $(cat "$tmp/del.txt")"; fi
grep -q "is the parent of queue(s) lab-child" "$tmp/del.txt" || fail "delete parent: $(cat "$tmp/del.txt")"
"$FABCTL" delete -f "$tmp/tree.yaml" >"$tmp/del.txt" 2>&1 || fail "delete -f: $(cat "$tmp/del.txt")"
printf 'apiVersion: fabrica.dev/v1\nkind: Queue\nmetadata: {name: "Bad Name!"}\nspec: {}\n' >"$tmp/bad.yaml"
if "$FABCTL" apply -f "$tmp/bad.yaml" >"$tmp/bad.txt" 2>&1; then fail "applied a bad name"; fi
grep -q "Queue metadata.name: 'Bad Name!' is not a valid name" "$tmp/bad.txt" || fail "bad name: $(cat "$tmp/bad.txt")"
printf 'apiVersion: fabrica.dev/v1\nkind: Queue\nmetadata: {name: 2024}\nspec: {}\n' >"$tmp/bad.yaml"
if "$FABCTL" apply -f "$tmp/bad.yaml" >"$tmp/bad.txt" 2>&1; then fail "applied a numeric name"; fi
grep -q "Queue metadata.name: a name must have 1 to 63 characters" "$tmp/bad.txt" || fail "numeric name: $(cat "$tmp/bad.txt")"
printf 'just some text\n' >"$tmp/bad.yaml"
if "$FABCTL" apply -f "$tmp/bad.yaml" >"$tmp/bad.txt" 2>&1; then fail "applied a scalar"; fi
grep -q "bad.yaml:1: a document must be an object" "$tmp/bad.txt" || fail "scalar: $(cat "$tmp/bad.txt")"
# As kubectl: a directory applies its manifests, `-f -` reads standard input, and nothing to
# apply is an error.
: >"$tmp/empty.yaml"
if "$FABCTL" apply -f "$tmp/empty.yaml" >"$tmp/bad.txt" 2>&1; then fail "applied an empty file"; fi
grep -q "empty.yaml: no objects in it" "$tmp/bad.txt" || fail "empty file: $(cat "$tmp/bad.txt")"
# A refusal of what came on standard input says so (a trial read "queues/bad1 (-)").
printf 'apiVersion: fabrica.dev/v1\nkind: Queue\nmetadata: {name: bad1}\nspec: {weight: -1}\n' |
  "$FABCTL" apply -f - >"$tmp/bad.txt" 2>&1 && fail "applied a negative weight"
grep -q "queues/bad1 (standard input)" "$tmp/bad.txt" || fail "stdin refusal: $(cat "$tmp/bad.txt")"
mkdir -p "$tmp/dir"
cp "$tmp/tree.yaml" "$tmp/dir/a.yaml"
echo "not applied" >"$tmp/dir/notes.txt"
"$FABCTL" apply -f "$tmp/dir" >"$tmp/dir.txt" 2>&1 || fail "apply a directory: $(cat "$tmp/dir.txt")"
grep -q "queues/lab-child created" "$tmp/dir.txt" || fail "directory: $(cat "$tmp/dir.txt")"
"$FABCTL" delete -f - <"$tmp/tree.yaml" >"$tmp/del.txt" 2>&1 || fail "delete -f -: $(cat "$tmp/del.txt")"
"$FABCTL" get queues >"$tmp/q.txt"
if grep -q "^lab" "$tmp/q.txt"; then fail "delete -f - left: $(cat "$tmp/q.txt")"; fi
# A node the health controller cordoned stays so through an admin's uncordon, which says so
# (exit 1) instead of reporting it done.
"$FABCTL" debug inject l4-1 --xid 79 --gpu 0 >/dev/null || fail "inject an XID"
for _ in $(seq 100); do
  "$FABCTL" get nodes | contains "^l4-1 .*SchedulingDisabled" && break
  sleep 0.2
done
rc=0
"$FABCTL" uncordon l4-1 >"$tmp/uncordon.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "node/l4-1 stays cordoned: the health controller holds it" "$tmp/uncordon.txt" ||
  fail "uncordon of a node under repair (rc $rc): $(cat "$tmp/uncordon.txt")"
# `get nodes` says where the health controller has it.
"$FABCTL" get nodes | grep -Eq "^l4-1 +Ready,SchedulingDisabled \((cordoned|draining|repair|burn-in)\) " ||
  fail "get nodes does not show l4-1's repair: $("$FABCTL" get nodes)"
# Cordoned by the health controller, and by an admin too: describe says who keeps it, and
# lists the work on a node with what it holds.
"$FABCTL" describe node l4-1 | contains "^Cordoned:   by the health controller" ||
  fail "describe l4-1: $("$FABCTL" describe node l4-1 | grep -v '^  ')"
"$FABCTL" cordon l4-1 >/dev/null || fail "cordon l4-1"
"$FABCTL" describe node l4-1 | contains "^Cordoned:   by admin (fabctl uncordon l4-1)" ||
  fail "describe l4-1 after an admin's cordon: $("$FABCTL" describe node l4-1 | grep -v '^  ')"
"$FABCTL" describe node l4-1 | contains "^Allocated:  .* of [0-9]* GPUs\?" ||
  fail "describe l4-1 allocated: $("$FABCTL" describe node l4-1 | grep -v '^  ')"
# An uncordon then lifts the admin's cordon (the node comes back after its burn-in), and says
# the health controller still holds it.
rc=0
"$FABCTL" uncordon l4-1 >"$tmp/uncordon2.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "the admin's cordon is lifted" "$tmp/uncordon2.txt" ||
  fail "uncordon of a node an admin and the health controller cordoned (rc $rc): $(cat "$tmp/uncordon2.txt")"
# (The health controller's own cordon is spec.unschedulable too: the admin's is the one the
# API stamps with the cordoned-by annotation.)
node_json=$("$FABCTL" get node l4-1 -o json) && grep -q '"l4-1"' <<<"$node_json" ||
  fail "get node l4-1: $node_json"
grep -q 'fabrica.dev/cordoned-by' <<<"$node_json" && fail "the admin's cordon stays: $node_json"
# The built-in unqueued, applied back as `get` shows it with a change, becomes an admin's queue.
"$FABCTL" get queue unqueued -o yaml | sed 's/^spec: {}$/spec: {weight: 3}/' >"$tmp/unqueued.yaml"
grep -q "weight: 3" "$tmp/unqueued.yaml" || fail "unqueued's yaml: $(cat "$tmp/unqueued.yaml")"
"$FABCTL" apply -f "$tmp/unqueued.yaml" >"$tmp/apply-u.txt" 2>&1 || fail "apply unqueued: $(cat "$tmp/apply-u.txt")"
"$FABCTL" get queue unqueued -o yaml | contains "weight: 3" || fail "unqueued not stored: $("$FABCTL" get queue unqueued -o yaml)"
if "$FABCTL" describe queue unqueued | contains "^Built in"; then fail "an admin's unqueued described as built in"; fi
# A running workload made inactive stops as its owner asked: no eviction said or counted (the
# grace period is half a wall second here, too short to watch it Stopping; e2e_test has it).
read -r ns running < <("$FABCTL" get workloads -A | awk '$3 == "Running" {print $1, $2; exit}')
[ -n "$running" ] || fail "no running workload: $("$FABCTL" get workloads -A)"
evictions() {
  "$FABCTL" get workload "$running" -n "$ns" -o json | tr -d ' \n' | grep -o '"evictions":{"count":[0-9]*' || true
}
before=$(evictions)
# Its events watched (kubectl get events -w): the history first, then each event as it comes.
timeout 8 "$FABCTL" get events "$running" -n "$ns" -w >"$tmp/events-watch.txt" 2>&1 &
events_watch=$!
sleep 1
"$FABCTL" patch workload "$running" -n "$ns" -p '{"spec": {"active": false}}' >/dev/null || fail "deactivate"
for _ in $(seq 100); do
  "$FABCTL" get workloads -n "$ns" | contains "^$running  *Inactive" && break
  sleep 0.2
done
"$FABCTL" get workloads -n "$ns" | contains "^$running  *Inactive" ||
  fail "a deactivated run: $("$FABCTL" get workloads -n "$ns")"
events=$("$FABCTL" get events "$running" -n "$ns")
grep -q "Stopping" <<<"$events" && grep -q "Deactivated" <<<"$events" ||
  fail "a deactivated run's events: $events"
wait "$events_watch" || true  # (timeout ends it: 124)
[ "$(grep -c "LAST SEEN" "$tmp/events-watch.txt")" = 1 ] && grep -q "Stopping" "$tmp/events-watch.txt" &&
  grep -q "Deactivated" "$tmp/events-watch.txt" || fail "get events -w: $(cat "$tmp/events-watch.txt")"
[ "$(grep -c "Stopping" "$tmp/events-watch.txt")" = 1 ] ||
  fail "get events -w said an event twice: $(cat "$tmp/events-watch.txt")"
# Listed by when each was last seen, oldest first (a wait repeated since stands last).
awk 'NR > 1 {print $1}' <<<"$events" | LC_ALL=C sort -c 2>/dev/null ||
  fail "events not in the order last seen: $events"
if sed -n '/Stopping/,$p' <<<"$events" | grep -Eq "Evicting|Preempted"; then
  fail "a deactivation said as an eviction: $events"
fi
[ "$(evictions)" = "$before" ] || fail "a deactivation counted as an eviction: $before -> $(evictions)"
# fabctl drain, as kubectl's: the node cordoned, its work evicted (each keeps its devices
# through the grace period, then waits again) and the command returns once nothing runs there.
read -r dns dname dnode < <("$FABCTL" get workloads -A | awk '$3 == "Running" && $6 !~ /,/ {print $1, $2, $6; exit}')
[ -n "$dnode" ] || fail "no running workload on one node: $("$FABCTL" get workloads -A)"
"$FABCTL" drain "$dnode" --timeout 120 >"$tmp/drain.txt" 2>&1 || fail "drain $dnode: $(cat "$tmp/drain.txt")"
grep -q "^node/$dnode cordoned" "$tmp/drain.txt" && grep -q "^evicting workload/$dns/$dname" "$tmp/drain.txt" &&
  grep -q "^node/$dnode drained" "$tmp/drain.txt" || fail "drain output: $(cat "$tmp/drain.txt")"
if "$FABCTL" get workloads -A | awk -v n="$dnode" '$3 == "Running" && $6 ~ n' | contains .; then
  fail "work still on the drained $dnode: $("$FABCTL" get workloads -A)"
fi
"$FABCTL" get events "$dname" -n "$dns" | contains "Evicted .*evicted by admin: drain of node $dnode" ||
  fail "no eviction event for the drain: $("$FABCTL" get events "$dname" -n "$dns")"
"$FABCTL" uncordon "$dnode" >/dev/null || fail "uncordon $dnode"
# A file with a queue and the tenant it names, in that order: the tenant is applied first, so
# no "does not exist" warning; a queue naming a tenant no one has is warned of.
cat >"$tmp/newteam.yaml" <<YAML
apiVersion: fabrica.dev/v1
kind: Queue
metadata: {name: team-n}
spec: {parent: research, tenants: [team-n]}
---
apiVersion: fabrica.dev/v1
kind: Tenant
metadata: {name: team-n}
YAML
said=$("$FABCTL" apply -f "$tmp/newteam.yaml" 2>&1) || fail "apply team-n: $said"
grep -q "^tenants/team-n created" <<<"$said" && grep -q "^queues/team-n created" <<<"$said" &&
  ! grep -q "does not exist" <<<"$said" || fail "apply of a queue and its tenant: $said"
said=$("$FABCTL" patch queue team-n -p '{"spec": {"tenants": ["team-nn"]}}' 2>&1) || fail "patch team-n: $said"
grep -q "Warning: spec.tenants: tenant 'team-nn' does not exist" <<<"$said" || fail "no warning: $said"
"$FABCTL" delete -f "$tmp/newteam.yaml" >/dev/null 2>&1 || fail "delete team-n"
# A queue stopped by its parent's stopPolicy says which ancestor stopped it (a trial saw
# "Active: false" with no reason).
"$FABCTL" patch queue research -p '{"spec": {"stopPolicy": "Hold"}}' >/dev/null || fail "hold research"
described=""
for _ in $(seq 100); do
  described=$("$FABCTL" describe queue team-a)
  grep -q "^Active: *false" <<<"$described" && break
  sleep 0.2
done
grep -q "^Active: *false (its ancestor research's stopPolicy Hold)$" <<<"$described" ||
  fail "a queue held by its parent: $described"
"$FABCTL" patch queue research -p '{"spec": {"stopPolicy": "None"}}' >/dev/null || fail "release research"
# `usage` reads as the other tables: one upper-case word a header, costs in cents (a trial
# read "tenant  GPU-H HELD  GPU-H USED  EFF  COST USD" as eight columns, costs to 6 decimals).
usage=$("$FABCTL" usage --window 1h --by tenant) || fail "usage: $usage"
grep -q "^TENANT  *GPU-HOURS-HELD  *GPU-HOURS-USED  *EFFICIENCY  *COST-[A-Z]*$" <<<"$usage" ||
  fail "usage header: $usage"
grep -Eq "^team-b  *[0-9]+\.[0-9]{2}  *[0-9]+\.[0-9]{2}  *(-|[0-9]+%)  *[0-9]+\.[0-9]{2}$" <<<"$usage" ||
  fail "usage row of team-b: $usage"
echo "OK: queues applied twice, pending listed in order, a foreign queue refused, flavours counted, a gang admitted in part, grown and shrunk for urgent work, a flavour order kept, a tree applied child first, a directory and standard input applied"
