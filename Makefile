# Keel's build. `make run` and `make test` are the README's two set-up commands.
GO        ?= go
BIN       := bin/keel
DATA_DIR  ?= ./data
FUZZTIME  ?= 10s
BENCHTIME ?= 1s

.PHONY: all build run test test-long bench fuzz vet fmt clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/keel

# A single-node combined broker+controller on localhost:9092, data under ./data.
run: build
	./$(BIN) server --log-dirs $(DATA_DIR)

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-formatted:"; echo "$$unformatted"; exit 1; fi

# What CI runs (.ci/run): vet, then every test with the race detector (the
# storage engine, network and broker packages are concurrent). The timeout
# is per package and only catches a hang: integration, the longest, takes
# ~15 minutes on a 2-core machine, and a CI machine a third slower must
# still pass.
test: vet
	$(GO) test -race -count=1 -timeout 25m ./...

# Longer soak, chaos and exhaustive runs (KEEL_LONG=1 turns them on).
test-long: vet
	KEEL_LONG=1 $(GO) test -race -count=1 -timeout 60m ./...

# Hot-path benchmarks, with their same-run baselines; then the live keel
# process under a kgo producer and consumer next to franz-go's kfake
# (integration/bench_test.go: a table of records/s, MB/s, latencies, ratios;
# about 4 minutes each for the kfake comparison and the replication table,
# 6 for Jay Kreps's 2014 producer command lines on two 3-node clusters (with
# and without keel.log.cache.drop.behind.bytes), 6 for the produce latency
# while a large topic is deleted;
# KEEL_BENCH_* variables tune them). With KEEL_JAVA_CLASSPATH set
# (kafka-clients, see integration/java_test.go), the replication table with
# the Java producer too.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...
	KEEL_BENCH=1 $(GO) test -run '^(TestKeelPerfAgainstKfake|TestReplicationPerf|TestKreps2014Perf|TestJavaReplicationPerf|TestDeletionStallPerf)$$' -count=1 -v -timeout 60m ./integration/

# A short run of every fuzz target (FUZZTIME each).
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

clean:
	rm -rf bin
