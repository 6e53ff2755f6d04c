# The commands of the README: `make run`, `make check` and `make test`. Each installs what it needs.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
# Downloaded Kafka jars and other caches live outside the work tree.
export DPMSTREAM_CACHE ?= $(HOME)/.cache/dpmstream
PORT   ?= 9108

.PHONY: run check test install install-system install-kafka check-env clean

# rustup installs cargo here; the optional compiled core (native/, parsers/_native) needs it.
export PATH := $(HOME)/.cargo/bin:$(PATH)
HAVE_CARGO := $(shell command -v cargo >/dev/null 2>&1 && echo 1)

$(BIN)/.installed: pyproject.toml native/Cargo.toml native/Cargo.lock $(wildcard native/src/*.rs)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	@# The extension was built as parsers/_fastlines until it became the whole compiled
	@# core (parsers/_native): nothing loads the old one; removed so that no one is misled.
	rm -f parsers/_fastlines*.so
	$(BIN)/pip install -q -e '.[kafka,test]'
	@$(BIN)/python -c "from dpmstream.parsers import fastpath; \
		print('compiled line parser and engine:', 'built' if fastpath.available() else 'not built (pure Python)')"
	touch $@

install: $(BIN)/.installed

# Debian packages for the real services (rsyslog, Kafka client, Prometheus, Nagios).
install-system:
	bash scripts/install-system.sh

# Kafka 4.3.1 broker jars from Maven Central, fetched once into $(DPMSTREAM_CACHE).
install-kafka:
	bash scripts/install-kafka.sh

# The main job on an embedded default: a simulated DPM head node (the 2011 thesis setup)
# through the core, metrics served on 127.0.0.1:$(PORT), a summary printed.
# HOLD=300 make run keeps the metrics up for five minutes after the summary; PORT=9200
# serves them there instead (PORT=0: any free port). Each run starts from a clean output:
# $(OUT).records.jsonl holds this run's records, once each (run --records appends).
HOLD   ?= 0
OUT    ?= out/demo
run: install
	$(BIN)/dpmstream simulate --out $(OUT) --quiet
	rm -f $(OUT).records.jsonl
	$(BIN)/dpmstream run --once --tz Europe/Zurich --metrics-port $(PORT) --hold $(HOLD) \
		--records $(OUT).records.jsonl $(OUT).log $(OUT).dpns.log

# The developer's fast loop, with only the Python install: every test that starts no
# service (Kafka, rsyslog, Prometheus, Nagios, Chromium, docker-compose; marked `services`,
# and tests/service_guard.py fails an unmarked one that starts one) and is not marked
# `slow` (a whole build, a site-sized matrix, a checkpoint after every line), on every
# core (pytest-xdist). `make test` is the full suite, the one CI runs: it runs all of these too.
# --dist worksteal: a worker that runs out of tests takes some from the other, so one
# long test at the end of a worker's share does not leave the other core idle.
# One worker more than the cores: some tests wait by design (a writer paced at 20 k lines/s,
# a probe's -t, a stop deadline), and a third worker runs while they wait. On 2 cores,
# quiet: 2:46-3:08 with 2 workers, 2:40 with 3, 2:55 with 4 (each worker builds the
# session's shared sites again).
CHECK_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
check: install
	DPMSTREAM_REQUIRE_NATIVE=$(HAVE_CARGO) $(BIN)/python -m pytest -q -m "not services and not slow" \
		-n $(CHECK_WORKERS) --dist worksteal

# Where cargo exists the compiled parser must have been built: a failed build fails a test.
# The extension's own unit tests (native/src: e.g. its twin of Python's random) run first.
test: install install-system install-kafka
	if [ -n "$(HAVE_CARGO)" ]; then cd native && cargo test --release --locked --quiet; fi
	DPMSTREAM_REQUIRE_NATIVE=$(HAVE_CARGO) $(BIN)/python -m pytest -ra --durations=60

clean:
	rm -rf out .pytest_cache
