#!/usr/bin/env bash
# Isolation as a user sees it, with the real binaries against `fabrica up`: two trusted tenants
# of one trust domain (team-a, team-b) share one GPU fractionally, each share labelled with its
# trust domain; lowering team-b's trust leaves them running (nothing is moved) and the apply
# warns, naming the GPU; an untrusted tenant's share says its GPU is closed to other tenants.
# Usage: fabctl_isolation_test.sh FABRICA_BIN FABCTL_BIN SOURCE_DIR
set -euo pipefail
FABRICA=$1
FABCTL=$2
source "$(dirname "$0")/factory_lib.sh"
fail() { echo "FAIL: $*"; tail -5 "$tmp/up.log"; exit 1; }
start_factory
export FABRICA_CONFIG="$tmp/data/fabctl.yaml"
[ -s "$FABRICA_CONFIG" ] || fail "no fabctl config from fabrica up"

share() {  # share NAMESPACE NAME
  cat <<YAML
apiVersion: fabrica.dev/v1
kind: Workload
metadata: {name: $2, namespace: $1}
spec:
  nodeSelector: {kubernetes.io/hostname: h200-1}
  podSets: [{name: server, count: 1, cpu: "2", memory: 8Gi, devices: {gpuMilli: 400m}}]
  run: {command: [serve], durationSeconds: 3600}
---
YAML
}
{ share team-a sa; share team-b sb; share partner-x sx; } >"$tmp/shares.yaml"
"$FABCTL" apply -f "$tmp/shares.yaml" >/dev/null || fail "apply shares"
running() { "$FABCTL" get workloads -A | awk '$3 == "Running"' | wc -l; }
for _ in $(seq 50); do [ "$(running)" = 3 ] && break; sleep 0.2; done
[ "$(running)" = 3 ] || fail "shares not running: $("$FABCTL" get workloads -A)"
gpu_of() { "$FABCTL" get workload "$2" -n "$1" -o json |
  python3 -c 'import json,sys; a=json.load(sys.stdin)["status"]["assignments"][0]; print(a["node"], a["devices"][0]["index"])'; }
isolation_of() { "$FABCTL" get workload "$2" -n "$1" -o json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["isolation"])'; }
[ "$(gpu_of team-a sa)" = "$(gpu_of team-b sb)" ] ||
  fail "one trust domain's shares on two GPUs: $(gpu_of team-a sa) / $(gpu_of team-b sb)"
[ "$(gpu_of partner-x sx)" != "$(gpu_of team-a sa)" ] || fail "the untrusted share joined theirs"
[ "$(isolation_of team-a sa)" = "fractional share within trust domain research" ] ||
  fail "team-a's label: $(isolation_of team-a sa)"
[ "$(isolation_of partner-x sx)" = "fractional share, its GPU closed to other tenants (untrusted)" ] ||
  fail "partner-x's label: $(isolation_of partner-x sx)"

# team-b made standard: its share may no longer sit beside team-a's. Nothing is moved; the
# apply says so and names the GPU.
printf 'apiVersion: fabrica.dev/v1\nkind: Tenant\nmetadata: {name: team-b}\nspec: {trust: standard, trustDomain: team-b}\n' >"$tmp/team-b.yaml"
# A server dry run warns the same, and changes nothing (a trial's said nothing).
"$FABCTL" apply -f "$tmp/team-b.yaml" --dry-run=server >"$tmp/dry.out" 2>"$tmp/dry.err" || fail "dry run: $(cat "$tmp/dry.err")"
grep -q "Warning: tenant team-b (standard) shares 1 GPU(s) with other tenants' pods that its trust no longer allows" "$tmp/dry.err" ||
  fail "no warning in the dry run: $(cat "$tmp/dry.out" "$tmp/dry.err")"
"$FABCTL" get tenant team-b -o yaml | grep -q "trust: trusted" || fail "the dry run changed team-b"
"$FABCTL" apply -f "$tmp/team-b.yaml" >"$tmp/apply.out" 2>"$tmp/apply.err" || fail "apply team-b: $(cat "$tmp/apply.err")"
grep -q "tenants/team-b configured" "$tmp/apply.out" || fail "apply said: $(cat "$tmp/apply.out")"
gpu="$(gpu_of team-b sb)"
grep -q "Warning: tenant team-b (standard) shares 1 GPU(s) with other tenants' pods that its trust no longer allows (${gpu/ / GPU }): nothing running is moved, and no new sharer joins those GPUs until the pods placed under the other trust have gone" "$tmp/apply.err" ||
  fail "no warning for the shared GPU: $(cat "$tmp/apply.err")"
[ "$(grep -c "Warning: tenant team-b" "$tmp/apply.err")" = 1 ] || fail "warned twice: $(cat "$tmp/apply.err")"
# The server warns, so a patch (as kubectl's or curl's) is told too.
"$FABCTL" patch tenant team-b -p '{"spec":{"trust":"untrusted"}}' >/dev/null 2>"$tmp/patch.err" || fail "patch team-b: $(cat "$tmp/patch.err")"
grep -q "Warning: tenant team-b (untrusted) shares 1 GPU(s)" "$tmp/patch.err" ||
  fail "no warning from the patch: $(cat "$tmp/patch.err")"
[ "$(running)" = 3 ] || fail "a running share was moved: $("$FABCTL" get workloads -A)"
# Back to trusted in the domain: nothing to warn about.
printf 'apiVersion: fabrica.dev/v1\nkind: Tenant\nmetadata: {name: team-b}\nspec: {trust: trusted, trustDomain: research}\n' >"$tmp/team-b2.yaml"
"$FABCTL" apply -f "$tmp/team-b2.yaml" >/dev/null 2>"$tmp/apply2.err" || fail "apply team-b back"
! grep -q "Warning: tenant team-b" "$tmp/apply2.err" || fail "warned after trust restored: $(cat "$tmp/apply2.err")"
echo "fabctl isolation: OK"
