#!/usr/bin/env bash
# Runs every Fuzz* target in the module for a short time each: `make fuzz`.
set -euo pipefail
fuzztime=${1:-10s}
cd "$(dirname "$0")/.."
grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(' . | sort | while read -r file; do
	pkg=./$(dirname "${file#./}")
	for target in $(grep -oE '^func Fuzz[A-Za-z0-9_]+' "$file" | sed 's/^func //'); do
		echo "== $pkg $target ($fuzztime)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
	done
done
