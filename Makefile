# tilekit: port GPU kernels to cuTile Rust and prove them correct and fast.
#
#   make KERNEL=rms_norm perf      # set-up if needed, build, symbol check, time what is missing or
#                                  # stale (baselines and port), render the report and its verdict
#   make check                     # lint, then the kit's own tests (what CI runs)
#
# `make help` lists every target. Variables can be set on the command line:
#   KERNEL=rms_norm (or all)  OUT_ROOT=out  BASELINES="cutile triton torch"  FORCE=1  STRICT=1  V=1
#   BASELINES unset: each kernel's own, every backend its kernels/<k>/baselines.py declares (ours,
#           torch_flash for attention, torch_compile for fused_add_rms_norm, the providers tilegym, liger, liger_cutile where they have
#           the op: tools/tilekit/runtime/providers.py, docs/kernels.md). Set: those, for every kernel.
#   GPUS=N: test/baseline/perf spread their cases over N GPUs, one pinned pytest-xdist worker
#           each (default: every visible GPU; 1 = one process, as on a one-GPU host; docs/multi-gpu.md).
#           baseline (all BASELINES) and perf are one pytest session per make call, KERNEL=all included.
#   SWEEP=quick|full (default full), SHARD=i/N: make sweep's grid size and the 1/N of it this host
#           times (docs/sweep.md).
#   SETTLE_FIGURE=cold|hot (default cold): the figure that judges the configs `make settle` timed
#           (docs/reports.md, "Configs of a few µs").
# Each stage writes under $(OUT_ROOT)/$(KERNEL)/ (see docs/ and DESIGN.md's layout).

KERNEL    ?= rms_norm
OUT_ROOT  ?= out
STRICT    ?= 0
V         ?= 0
GPUS      ?=
SWEEP     ?= full
SHARD     ?=
SETTLE_FIGURE ?= cold
export GPUS

SHELL       := bash
.SHELLFLAGS := -eo pipefail -c
Q   := $(if $(filter 1,$(V)),,@)
ENV := . env/env.sh &&
PY  := $(ENV) "$$TILEKIT_PYTHON"
KDIR := $(OUT_ROOT)/$(KERNEL)
KTEST := tests/kernels/test_$(KERNEL).py
KERNELS := $(sort $(notdir $(patsubst %/kernel.rs,%,$(wildcard kernels/*/kernel.rs))))
STRICT_FLAG := $(if $(filter 1,$(STRICT)),--strict,)

# The environment: a target that needs it runs `make setup` first when its stamp (keyed by the
# requirement files, like the cache entries of env/env.sh) is missing. A GPU host running from
# `make bundle` (TILEKIT_PREBUILT=1) brings its own environment and skips this.
SETUP_STAMP := $(shell . env/env.sh >/dev/null 2>&1 && echo "$$TILEKIT_SETUP_STAMP")
ENV_READY := $(if $(filter 1,$(TILEKIT_PREBUILT)),,$(SETUP_STAMP))

# What a timed raw log is made from; make re-times a log that is missing or older than any of it
# (FORCE=1 re-times all). The port: the library, its kernel's folder and suite, the timing code and
# the environment fingerprint; a baseline: the same less the library and the Rust files.
LIB         := $(or $(TILEKIT_LIB),build/libcutile_kernels.so)
FINGERPRINT := $(OUT_ROOT)/.timing-env.txt
REPORT_CODE := $(filter-out %/model_report.py,$(wildcard tools/tilekit/__main__.py tools/tilekit/reports/*.py \
               tools/tilekit/testing/doctor.py tools/tilekit/testing/fingerprint.py))
# the model check, the modules and the scaffold are not on a timed stage's path
NOT_TIMING  := tools/tilekit/testing/model.py tools/tilekit/reports/model_report.py tools/tilekit/runtime/modules.py \
               tools/tilekit/testing/scaffold.py
TIMING_CODE := $(filter-out $(REPORT_CODE) $(NOT_TIMING),$(wildcard tools/tilekit/*.py tools/tilekit/*/*.py)) tests/kernels/conftest.py pyproject.toml \
               scripts/pytest_stage.sh scripts/timed_stage.sh
kernel_files = $(filter-out %.md,$(wildcard kernels/$(1)/*)) tests/kernels/test_$(1).py
port_deps    = $(LIB) $(call kernel_files,$(1)) $(TIMING_CODE) $(FINGERPRINT)
baseline_deps = $(filter-out %.rs,$(call kernel_files,$(1))) $(TIMING_CODE) $(FINGERPRINT)
SELECTED := $(if $(filter all,$(KERNEL)),$(KERNELS),$(KERNEL))

# The timed stages run one pytest session per make call for what is out of date: `baseline` every
# backend of BASELINES, KERNEL=all every kernel, so the GPUs' workers start once and share all the
# cases (docs/multi-gpu.md). tilekit.testing.stage_logs writes one raw log per kernel and backend
# (DESIGN.md's reports/logs/*.full.txt); pytest's whole output goes to the session log.
empty :=
space := $(empty) $(empty)
comma := ,
KNOWN_BASELINES := cutile triton torch torch_flash torch_compile tilegym liger liger_cutile
# Each kernel's baselines (`baselines_of`): BASELINES where it is set (command line or environment,
# even empty: refused below), else what the kernel's baselines.py declares (scripts/
# declared_baselines.py, read without importing it), in KNOWN_BASELINES' order. Read only for the
# goals that time or check baselines.
BASELINE_GOALS := baseline perf all sweep validate settle
BASELINES_SET := $(filter-out undefined,$(origin BASELINES))
READ_DECLARED := $(if $(BASELINES_SET),,$(filter $(BASELINE_GOALS),$(MAKECMDGOALS)))
DECLARED := $(if $(READ_DECLARED),$(shell python3 -S -E scripts/declared_baselines.py $(filter $(KERNELS),$(SELECTED))))
baselines_of = $(if $(BASELINES_SET),$(BASELINES),$(filter $(subst $(comma),$(space),$(patsubst $(1)=%,%,$(filter $(1)=%,$(DECLARED)))),$(KNOWN_BASELINES)))
SELECTED_BASELINES := $(filter $(sort $(foreach k,$(SELECTED),$(call baselines_of,$(k)))),$(KNOWN_BASELINES))
BASELINE_IDS := $(patsubst cutile,cutile_py,$(SELECTED_BASELINES))
UNKNOWN_BASELINES := $(filter-out $(KNOWN_BASELINES),$(BASELINES))
PERF_LOG := $(OUT_ROOT)/{kernel}/reports/logs/perf_{backend}.full.txt
BASELINE_LOG := $(OUT_ROOT)/{kernel}/reports/logs/baseline_perf_{backend}.full.txt
stage_file = $(subst {backend},$(3),$(subst {kernel},$(2),$(1)))
PORT_RAWS := $(foreach k,$(SELECTED),$(call stage_file,$(PERF_LOG),$(k),cutile_rs))
BASELINE_RAWS := $(foreach k,$(SELECTED),$(foreach b,$(call baselines_of,$(k)),$(call stage_file,$(BASELINE_LOG),$(k),$(b))))
PERF_MDS := $(foreach k,$(SELECTED),$(OUT_ROOT)/$(k)/reports/performance.md)
# A stage stopped by a signal keeps its raw logs (make would delete a target whose recipe was killed);
# scripts/timed_stage.sh dates them 1970 so that the next make re-times them, or, killed outright,
# leaves <stage>.session.txt.running, which makes the next make run the stage (the rules below).
.PRECIOUS: $(PORT_RAWS) $(BASELINE_RAWS)
# scripts/timed_stage.sh's SPECs: kernel,backend id,raw log,prerequisites...
port_specs = $(foreach k,$(SELECTED),$(subst $(space),$(comma),$(strip $(k) cutile_rs \
    $(call stage_file,$(PERF_LOG),$(k),cutile_rs) $(call port_deps,$(k)))))
baseline_specs = $(foreach k,$(SELECTED),$(foreach b,$(call baselines_of,$(k)),$(subst $(space),$(comma),$(strip $(k) \
    $(patsubst cutile,cutile_py,$(b)) $(call stage_file,$(BASELINE_LOG),$(k),$(b)) $(call baseline_deps,$(k))))))
SESSION_DIR := $(if $(filter all,$(KERNEL)),$(OUT_ROOT)/logs,$(OUT_ROOT)/$(KERNEL)/reports/logs)
FORCE_FLAG := $(if $(filter 1,$(FORCE)),--force,)
timed_stage = mkdir -p $(SESSION_DIR) $(foreach k,$(SELECTED),$(OUT_ROOT)/$(k)/reports/logs) && \
    $(ENV) scripts/timed_stage.sh $(1) $(SESSION_DIR)/$(1).session.txt '$(2)' $(FORCE_FLAG) -- $(3)
# After the reports: a session that did not end normally makes the target fail, and its raw logs
# (rendered above, kept) are marked out of date so that the next make re-times them.
stage_status = f=$(SESSION_DIR)/$(1).session.txt.failed; if [ -s $$f ]; then \
    while read -r log; do [ ! -f "$$log" ] || touch -d @0 "$$log"; done <$$f; rm -f $$f; \
    echo "make $(1): a pytest session did not end normally (see $(SESSION_DIR)/$(1).session*.txt); its raw logs are kept and will be re-timed" >&2; exit 2; fi
# `make -n` still runs the recipe lines that call $(MAKE) (the KERNEL=all loops); they skip the summary.
DRY_RUN := $(findstring n,$(firstword -$(MAKEFLAGS)))
summary = $(if $(DRY_RUN),true,$(PY) -m tilekit summary --out-root $(OUT_ROOT) $(KERNELS))
# Prints each selected kernel's verdict line; with STRICT=1 fails unless every one is DONE.
verdicts = rc=0; for f in $(PERF_MDS); do \
    v=$$(head -n 1 $$f 2>/dev/null || echo "VERDICT: (no report)"); echo "$$f: $$v"; \
    $(if $(filter 1,$(STRICT)),[ "$$v" = "VERDICT: DONE" ] || rc=1;,) done; \
    $(if $(filter 1,$(STRICT)),[ $$rc -eq 0 ] || echo "STRICT=1: a verdict is not DONE" >&2;,) exit $$rc

# make sweep: test_sweep over each selected kernel's grid, one pytest session on every GPU; a shard's
# logs go to sweep/shard-<i>-of-<N>/logs/, a whole run's to sweep/logs/ (tilekit.testing.sweep).
SHARD_SUB := $(if $(strip $(SHARD)),shard-$(subst /,-of-,$(strip $(SHARD)))/,)
SWEEP_LOG := $(OUT_ROOT)/{kernel}/sweep/$(SHARD_SUB)logs/sweep_{backend}.full.txt
SWEEP_SESSION := $(if $(filter all,$(KERNEL)),$(OUT_ROOT)/logs,$(OUT_ROOT)/$(KERNEL)/sweep)/sweep$(if $(SHARD_SUB),-$(SHARD_SUB:/=)).session.txt
SWEEP_IDS := cutile_rs $(BASELINE_IDS)
SWEEP_SELECT := test_sweep and ([$(subst $(space), or [,$(addsuffix -,$(SWEEP_IDS))))

KERNEL_GOALS := build symbols test baseline perf report validate all bundle sweep sweep-merge settle
ifneq ($(filter $(KERNEL_GOALS),$(MAKECMDGOALS)),)
ifeq ($(filter $(KERNEL),$(KERNELS) all),)
$(error KERNEL=$(KERNEL): there is no kernels/$(KERNEL)/kernel.rs; use one of: $(KERNELS), or all)
endif
endif
ifneq ($(filter $(BASELINE_GOALS),$(MAKECMDGOALS)),)
ifneq ($(UNKNOWN_BASELINES),)
$(error BASELINES: unknown backend '$(UNKNOWN_BASELINES)' (known: $(KNOWN_BASELINES)))
endif
ifeq ($(BASELINES_SET),)
$(foreach k,$(SELECTED),$(if $(call baselines_of,$(k)),,$(error KERNEL=$(k): no baselines: kernels/$(k)/baselines.py declares none that scripts/declared_baselines.py can read (its message above); set BASELINES to name them)))
endif
ifeq ($(BASELINE_IDS),)
$(error BASELINES is empty: name at least one of $(KNOWN_BASELINES))
endif
endif

.DEFAULT_GOAL := help
.PHONY: help setup doctor build symbols test baseline perf report validate all lint check bundle clean FORCE sweep sweep-merge model model-report rust-test new settle tilegym-tests

help: ## list the targets
	@echo "usage: make [KERNEL=name|all] [OUT_ROOT=dir] [BASELINES='$(KNOWN_BASELINES)'] [FORCE=1] [STRICT=1] [GPUS=N] [V=1] <target>"
	@echo "  BASELINES unset: each kernel's declared baselines (kernels/<k>/baselines.py)"
	@echo
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'
	@echo
	@echo "kernels: $(KERNELS) (KERNEL=all runs a target for each, then writes OUT_ROOT/summary.md)"

setup: ## install Python deps, CUDA >= 13.2 headers and libclang into the cache (idempotent; other targets run it when needed)
	$(Q)bash env/setup.sh

# The stamp env/setup.sh leaves when everything is in place (see ENV_READY above).
$(or $(SETUP_STAMP),.no-setup-stamp):
	@echo "make: the environment is not set up here (no $@): running make setup first (minutes, once)"
	$(Q)bash env/setup.sh

doctor: ## diagnose the environment: cargo, headers, libclang, torch, GPU, tileiras/ptxas/libnvvm
	$(Q)$(ENV) bash env/doctor

# What the timings depend on beyond the sources (GPU, driver, package versions, tileiras), rewritten
# only when it changes. `+`: also under `make -n`, so that a dry run tells the truth about re-timing.
$(FINGERPRINT): FORCE | $(ENV_READY)
	+$(Q)mkdir -p $(OUT_ROOT) && $(PY) -m tilekit fingerprint $@

# Raw logs of the timed stages, each one rule for every selected kernel (see timed_stage).
$(BASELINE_RAWS) &: $(foreach k,$(SELECTED),$(call baseline_deps,$(k))) $(if $(FORCE_FLAG)$(wildcard $(SESSION_DIR)/baseline.session.txt.running),FORCE) | $(ENV_READY)
	$(Q)$(call timed_stage,baseline,$(BASELINE_LOG),$(baseline_specs))

$(PORT_RAWS) &: $(LIB) $(foreach k,$(SELECTED),$(call port_deps,$(k))) $(if $(FORCE_FLAG)$(wildcard $(SESSION_DIR)/perf.session.txt.running),FORCE) | build-for-perf $(ENV_READY)
	$(Q)$(call timed_stage,perf,$(PERF_LOG),$(port_specs))

# A kernel's performance report (and its sanitized perf_*.txt / baseline_perf_*.txt): from its raw
# logs, its own baselines' (one rule per selected kernel).
define performance_md_rule
$(OUT_ROOT)/$(1)/reports/performance.md: $(OUT_ROOT)/$(1)/reports/logs/perf_cutile_rs.full.txt \
        $(foreach b,$(call baselines_of,$(1)),$(OUT_ROOT)/$(1)/reports/logs/baseline_perf_$(b).full.txt) $(REPORT_CODE) \
        $(wildcard $(OUT_ROOT)/$(1)/reports/logs/settle_perf.full.txt) | $(ENV_READY)
	$$(Q)$$(PY) -m tilekit report --kernel $(1) --dir $(OUT_ROOT)/$(1) --only performance --figure $(SETTLE_FIGURE)
endef
$(foreach k,$(SELECTED),$(eval $(call performance_md_rule,$(k))))

# A kernel folder copied from another gets the suite stub every kernel has (the same name-free
# file: tilekit.testing.suite generates the tests from the declaration), so make test/perf can name it.
tests/kernels/test_%.py: | kernels/%/kernel.rs
	$(Q)cp $(firstword $(wildcard tests/kernels/test_*.py)) $@ && echo "make: wrote $@ (the suite stub of every kernel)"

# The library when a timed stage needs it and no build ran yet (make -n on a fresh clone).
$(LIB):
	$(Q)$(MAKE) --no-print-directory KERNEL=$(firstword $(SELECTED)) build

ifeq ($(KERNEL),all)
# KERNEL=all: build/symbols/test/report/validate once per kernel, going on past a failing one;
# baseline and perf as one pytest session over every kernel's suite; then $(OUT_ROOT)/summary.md.
build symbols test report validate:
	$(Q)rc=0; for k in $(KERNELS); do \
	    echo "== make KERNEL=$$k $@"; $(MAKE) --no-print-directory KERNEL=$$k $@ || rc=$$?; \
	done; \
	$(summary) || rc=$$?; \
	exit $$rc

# A failed build or symbol check does not stop perf: every suite is timed (the failing kernel's
# cases say why) and the exit status is non-zero.
.PHONY: build-for-perf
build-for-perf: | $(ENV_READY)
	$(Q)$(MAKE) --no-print-directory KERNEL=all build || { mkdir -p $(OUT_ROOT)/logs; touch $(OUT_ROOT)/logs/perf.build-failed; }

all:
	$(Q)$(MAKE) --no-print-directory -k KERNEL=all build test baseline perf validate
else
build: | $(ENV_READY) ## cargo build the cdylib (a no-op when no source changed), then the symbol check
	$(Q)mkdir -p $(KDIR)/reports
	$(Q)$(ENV) scripts/build.sh $(KDIR)/reports/build.log
	$(Q)$(MAKE) --no-print-directory symbols

.PHONY: build-for-perf
build-for-perf: build

symbols: | $(ENV_READY) ## nm -D proves every export declared in kernels/$(KERNEL)/op.py is there (T)
	$(Q)$(ENV) scripts/check_symbols.sh "$$TILEKIT_LIB" $(KERNEL)

test: build $(KTEST) | $(ENV_READY) ## correctness of the port: pytest -k "cutile_rs and test_op", then reports/correctness.md
	$(Q)mkdir -p $(KDIR)/reports/logs
	$(Q)rc=0; $(ENV) scripts/pytest_stage.sh $(KDIR)/correctness_cutile_rs.txt -- $(KTEST) \
	    -k "cutile_rs and test_op" -v -x --timeout=60 -rs \
	    --junitxml=$(KDIR)/reports/logs/correctness.junit.xml || rc=$$?; \
	$(PY) -m tilekit report --kernel $(KERNEL) --dir $(KDIR) --only correctness $(STRICT_FLAG) || { r=$$?; [ $$rc -ne 0 ] || rc=$$r; }; \
	exit $$rc

report: | $(ENV_READY) ## no GPU: re-sanitize the raw logs on disk and re-render both reports
	$(Q)$(PY) -m tilekit report --kernel $(KERNEL) --dir $(KDIR) $(STRICT_FLAG) --figure $(SETTLE_FIGURE)

validate: | $(ENV_READY) ## check every output file of the kernel; prints a <VALIDATOR_OUTPUT> block
	$(Q)$(PY) -m tilekit validate --kernel $(KERNEL) --dir $(KDIR) --baselines "$(call baselines_of,$(KERNEL))"

all: ## build test baseline perf validate
	$(Q)$(MAKE) --no-print-directory build test baseline perf validate
endif

# baseline and perf, for one kernel or KERNEL=all: real file targets above; these print the outcome.
baseline: $(BASELINE_RAWS) ## CUPTI perf of each baseline (BASELINES, unset: the kernel's declared ones) that is missing or stale (one pytest session)
	$(Q)$(foreach k,$(SELECTED),$(PY) -m tilekit report --kernel $(k) --dir $(OUT_ROOT)/$(k) --only performance \
	    >/dev/null 2>&1 || true;) true
	$(Q)for f in $(BASELINE_RAWS); do echo "baseline: $$f"; done
	$(Q)$(call stage_status,baseline)

perf: build-for-perf $(PERF_MDS) ## CUPTI perf of the port (builds first; times the baselines it lacks), then the report and its verdict
	$(Q)$(if $(filter all,$(KERNEL)),$(summary) || exit $$?;,)
	$(Q)$(call stage_status,baseline); $(call stage_status,perf); \
	    if [ -e $(OUT_ROOT)/logs/perf.build-failed ]; then rm -f $(OUT_ROOT)/logs/perf.build-failed; \
	        echo "make KERNEL=all perf: a build or symbol check failed (above); every suite was timed anyway" >&2; exit 2; fi
	$(Q)$(verdicts)

# make settle: test_settle of each selected kernel, one pytest session per kernel (every case in one
# process is the point: the port and its baselines interleaved), its whole output the raw log
# reports/logs/settle_perf.full.txt; then the report (docs/reports.md, "Configs of a few µs").
settle: build-for-perf | $(ENV_READY) ## configs of a few µs: port and BASELINES in one process, over placements, interleaved, cold and hot; then the report
	$(Q)rc=0; $(foreach k,$(SELECTED),$(ENV) GPUS=1 TILEKIT_SETTLE_BACKENDS='$(subst $(space),$(comma),$(call baselines_of,$(k)))' \
	    scripts/pytest_stage.sh $(OUT_ROOT)/$(k)/reports/logs/settle_perf.full.txt -- tests/kernels/test_$(k).py \
	    -k test_settle --print-record -v -rs --timeout=600 || rc=$$?; \
	    $(PY) -m tilekit report --kernel $(k) --dir $(OUT_ROOT)/$(k) --only performance --figure $(SETTLE_FIGURE) || rc=$$?;) \
	exit $$rc

# The sweep: plan (checks SWEEP and SHARD, prints the cases), one pytest session for every selected
# kernel, then each kernel's sweep report (a shard leaves that to sweep-merge). A session that did not
# end normally still renders what it timed, and fails the target.
sweep: build-for-perf | $(ENV_READY) ## port and BASELINES over each kernel's shape grid on every GPU (SWEEP=quick|full, SHARD=i/N) -> sweep/sweep.{csv,md,svg}
	$(Q)$(PY) -m tilekit sweep plan --size '$(SWEEP)' --shard '$(SHARD)' --backends '$(subst $(space),$(comma),$(SWEEP_IDS))' $(SELECTED)
	$(Q)rm -rf $(foreach k,$(SELECTED),$(OUT_ROOT)/$(k)/sweep/$(SHARD_SUB)logs); mkdir -p $(dir $(SWEEP_SESSION)); rc=0; \
	$(ENV) TILEKIT_SWEEP='$(SWEEP)' TILEKIT_SHARD='$(SHARD)' scripts/pytest_stage.sh $(SWEEP_SESSION) -- \
	    $(foreach k,$(SELECTED),tests/kernels/test_$(k).py) -k '$(SWEEP_SELECT)' --print-record -v -rs --timeout=600 \
	    --continue-on-collection-errors --stage-log '$(SWEEP_LOG)' --stage-backends '$(subst $(space),$(comma),$(SWEEP_IDS))' || rc=$$?; \
	$(if $(SHARD_SUB),echo "sweep: shard $(SHARD) written under $(OUT_ROOT)/<kernel>/sweep/$(SHARD_SUB); when every shard is done: make KERNEL=$(KERNEL) sweep-merge";, \
	for k in $(SELECTED); do $(PY) -m tilekit sweep report --kernel $$k --dir $(OUT_ROOT)/$$k || rc=$$?; done;) \
	exit $$rc

sweep-merge: | $(ENV_READY) ## merge the SHARD=i/N runs' records into sweep/ (refuses mixed GPU models or kit versions)
	$(Q)rc=0; for k in $(SELECTED); do $(PY) -m tilekit sweep merge --kernel $$k --dir $(OUT_ROOT)/$$k || rc=$$?; done; exit $$rc

# The model check (docs/models.md): a decoder stack on ports against PyTorch, torch.compile and
# Liger-Kernel; MODEL_ARGS passes options to `python -m tilekit model run` (--config, --impls,
# --phases, --batches, --layers, --nrep). Appends to $(OUT_ROOT)/model/model.jsonl, then the report.
model: build | $(ENV_READY) ## the model check on a GPU: logits and prefill / CUDA-graph decode times -> OUT_ROOT/model/performance.md
	$(Q)$(PY) -m tilekit model run --out $(OUT_ROOT)/model $(MODEL_ARGS)
	$(Q)$(PY) -m tilekit model report --out $(OUT_ROOT)/model

model-report: | $(ENV_READY) ## no GPU: re-render OUT_ROOT/model/performance.md from its model.jsonl
	$(Q)$(PY) -m tilekit model report --out $(OUT_ROOT)/model

# TileGym's own op tests (tests/ops/test_<op>.py of the user's checkout, never copied) with the port
# as TileGym's cuTile backend of the op: tilekit.testing.tilegym_tests; reports/tilegym_tests.md.
tilegym-tests: build | $(ENV_READY) ## on a GPU: TileGym's tests of the op with the port as its cuTile backend: TILEGYM_PATH=<checkout>
	$(Q)$(if $(TILEGYM_PATH),,echo "make tilegym-tests: name a TileGym checkout: make KERNEL=$(KERNEL) tilegym-tests TILEGYM_PATH=<path> (git clone https://github.com/NVIDIA/TileGym)" >&2; exit 2)
	$(Q)$(PY) -m tilekit tilegym-tests --kernel $(KERNEL) --tilegym "$(TILEGYM_PATH)" --out $(KDIR)

new: | $(ENV_READY) ## write kernels/$(KERNEL)/ from its closest relative: make new KERNEL=<name> FROM=<kernel>
	$(Q)$(if $(FROM),,echo "make new: name the kernel to start from: make new KERNEL=<name> FROM=<kernel> (one of: $(KERNELS))" >&2; exit 2)
	$(Q)$(PY) -m tilekit new --name $(KERNEL) --from $(FROM)

rust-test: | $(ENV_READY) ## one kernel's Rust tests (validation, lowering, tileiras assembly for sm_90), as make check runs them
	$(Q)$(ENV) scripts/cargo_test.sh $(KERNEL)

lint: | $(ENV_READY) ## ruff check + ruff format --check (Python), rustfmt + clippy -D warnings (scripts/lint_rust.sh)
	$(Q)$(ENV) ruff check . && $(ENV) ruff format --check . || { echo "lint: fix with: ruff check --fix . && ruff format ." >&2; exit 1; }
	$(Q)$(ENV) scripts/lint_rust.sh

check: | $(ENV_READY) ## the kit's own tests: lint, Rust (kernels lowered and assembled for sm_90 on the CPU), then pytest (GPU tests skip with their reason)
	$(Q)$(MAKE) --no-print-directory lint
	$(Q)$(ENV) scripts/build.sh build/check-build.log
	$(Q)$(ENV) scripts/cargo_test.sh
	$(Q)$(PY) -m pytest tests -q -rs

bundle: build ## tarball to run test/baseline/perf/report on a GPU host without Rust or internet -> dist/
	$(Q)$(ENV) scripts/bundle.sh

clean: ## remove build/ and $(OUT_ROOT)/ (the cargo cache outside the repo stays)
	rm -rf build $(OUT_ROOT)
