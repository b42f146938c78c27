#!/usr/bin/env bash
# Profiles the keel broker process under make bench's load
# (integration TestKeelPerfAgainstKfake) with Linux perf: where the
# broker's CPU goes, with no profiling code in the binary.
#
#   scripts/perf-broker.sh [seconds]   # record that long (default 30)
#
# KEEL_BENCH_* variables apply (KEEL_BENCH_ROUNDS defaults to 1 here).
# Prints the bench table, then the hottest symbols; the perf data stays
# in the printed directory for `perf report -i`.
set -euo pipefail
seconds=${1:-30}
cd "$(dirname "$0")/.."
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 1; }
out=$(mktemp -d -t keel-perf-XXXXXX)
go test -c -o "$out/integration.test" ./integration/
go build -o "$out/keel" ./cmd/keel # kept for perf's symbols
(cd integration && KEEL_BENCH=1 KEEL_BENCH_ROUNDS=${KEEL_BENCH_ROUNDS:-1} KEEL_TEST_BINARY="$out/keel" \
	"$out/integration.test" -test.run '^TestKeelPerfAgainstKfake$' -test.v >"$out/bench.log" 2>&1) &
bench=$!
pid=
for _ in $(seq 1200); do
	pid=$(sed -n 's/.*keel process pid \([0-9][0-9]*\).*/\1/p' "$out/bench.log" | head -1)
	[ -n "$pid" ] && break
	sleep 0.1
done
if [ -z "$pid" ]; then
	echo "the bench did not start a keel process; see $out/bench.log" >&2
	exit 1
fi
perf record -F 999 -g -p "$pid" -o "$out/perf.data" -- sleep "$seconds" >/dev/null 2>&1 || true
wait "$bench" || { cat "$out/bench.log"; exit 1; }
sed -n '/^Keel vs kfake/,/^Load average/p' "$out/bench.log"
echo
echo "== hottest symbols of keel (pid $pid), self time"
perf report -i "$out/perf.data" --no-children --sort symbol --stdio -g none 2>/dev/null | grep '%' | head -30
echo
echo "== keel functions, including callees"
perf report -i "$out/perf.data" --children --sort symbol --stdio -g none 2>/dev/null | grep 'keel' | head -30
echo
echo "perf data and logs: $out"
