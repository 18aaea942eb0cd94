#!/usr/bin/env bash
# A real Prometheus scrapes a running factory's /metrics with a bearer token: the metering
# counters (fabrica_gpu_seconds_allocated_total, ..._used_total, fabrica_gpu_cost_total by tenant,
# queue and model) must parse, carry the demo's tenants, and grow between two scrapes.
# Usage: prometheus_scrape_test.sh FABRICA_BIN FABCTL_BIN SOURCE_DIR. Exit 77 (skip) without
# prometheus (Debian package `prometheus`; scripts/dev installs it).
set -euo pipefail
FABRICA=$1
FABCTL=$2
SRC=$3
if ! command -v prometheus >/dev/null; then
  echo "SKIP: prometheus is not installed (apt-get install prometheus)"
  exit 77
fi
source "$(dirname "$0")/factory_lib.sh"
start_factory --time-scale 20
token=$(sed -n 's/^token: //p' "$tmp/data/fabctl.yaml")
[ -n "$token" ] || { echo "FAIL: no token from fabrica up"; cat "$tmp/up.log"; exit 1; }
FABRICA_CONFIG="$tmp/data/fabctl.yaml" "$FABCTL" apply -f "$SRC/examples/demo.yaml"

prom_port=$(free_port)
cat >"$tmp/prometheus.yml" <<YAML
global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: fabrica
    authorization: {credentials: "$token"}
    static_configs: [{targets: ["127.0.0.1:$port"]}]
YAML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$tmp/prometheus.log" 2>&1 &

# The sum over the demo's tenants of a counter, as Prometheus has it ("" while absent).
query() {
  python3 - "$prom_port" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
port, q = sys.argv[1], sys.argv[2]
url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
try:
    data = json.load(urllib.request.urlopen(url, timeout=5))
except Exception:
    print("")
    sys.exit(0)
result = data.get("data", {}).get("result", [])
print(result[0]["value"][1] if result else "")
PY
}
first=""
for _ in $(seq 150); do
  first=$(query 'sum(fabrica_gpu_seconds_allocated_total{tenant="team-a"})')
  [ -n "$first" ] && [ "$first" != "0" ] && break
  sleep 0.4
done
if [ -z "$first" ] || [ "$first" = "0" ]; then
  echo "FAIL: Prometheus has no fabrica_gpu_seconds_allocated_total for team-a"
  query 'up{job="fabrica"}'
  tail -5 "$tmp/prometheus.log"
  tail -5 "$tmp/up.log"
  exit 1
fi
[ "$(query 'up{job="fabrica"}')" = "1" ] || { echo "FAIL: the scrape target is not up"; exit 1; }
for metric in fabrica_gpu_seconds_used_total fabrica_gpu_cost_total fabrica_meter_samples_total; do
  [ -n "$(query "count($metric)")" ] || { echo "FAIL: $metric is missing"; exit 1; }
done
sleep 3
second=$(query 'sum(fabrica_gpu_seconds_allocated_total{tenant="team-a"})')
python3 -c "import sys; a, b = float('$first'), float('$second'); sys.exit(0 if b > a else 1)" ||
  { echo "FAIL: the counter did not grow ($first -> $second)"; exit 1; }
echo "OK: Prometheus scraped team-a's GPU-seconds: $first -> $second"
