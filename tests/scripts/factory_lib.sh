# Shared by the script tests that run a factory: a scratch directory removed on exit (with
# every background job stopped), a free loopback port, and `start_factory [ARGS]`, which runs
# `$FABRICA up` there on plain HTTP and waits for its fabctl config ($tmp/data/fabctl.yaml).
# Source it after setting FABRICA.
tmp=$(mktemp -d)
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# (FACTORY_TLS=1: on HTTPS, its CA in $tmp/data/ca.crt: kubectl sends no token over plain HTTP.)
start_factory() {
  port=$(free_port)
  local plain=--plain-http
  [ "${FACTORY_TLS:-0}" = 1 ] && plain=
  "$FABRICA" up --data "$tmp/data" --listen "127.0.0.1:$port" $plain "$@" >"$tmp/up.log" 2>&1 &
  for _ in $(seq 100); do [ -s "$tmp/data/fabctl.yaml" ] && break; sleep 0.2; done
}
# `CMD | contains PATTERN`: grep -q that reads all its input. (grep -q stops at its first match,
# and a fabctl still writing then dies of SIGPIPE, which pipefail makes the pipeline's failure.)
contains() { grep "$@" >/dev/null; }
