# tilekit: port GPU kernels to cuTile Rust and prove them correct and fast.
#
#   make setup                     # once: Python deps, CUDA headers, libclang (cached outside the repo)
#   make KERNEL=rms_norm perf      # build, symbol check, time the port, render the report
#   make check                     # the kit's own tests (what CI runs)
#
# `make help` lists every target. Variables can be set on the command line:
#   KERNEL=rms_norm (or all)  OUT_ROOT=out  BASELINES="cutile triton torch"  STRICT=1  V=1
#   GPUS=N: test/baseline/perf spread their cases over N GPUs, one pinned pytest-xdist worker
#           each (default: every visible GPU; 1 = one process, as on a one-GPU host; docs/multi-gpu.md).
#           baseline (all BASELINES) and perf are one pytest session per make call, KERNEL=all included.
# Each stage writes under $(OUT_ROOT)/$(KERNEL)/ (see docs/ and DESIGN.md's layout).

KERNEL    ?= rms_norm
OUT_ROOT  ?= out
BASELINES ?= cutile triton torch
STRICT    ?= 0
V         ?= 0
GPUS      ?=
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

# The timed stages run one pytest session per make call: `baseline` every backend of BASELINES,
# KERNEL=all every kernel, so the GPUs' workers start once and share all the cases
# (docs/multi-gpu.md). tilekit.stage_logs still writes one raw log per kernel and backend
# (DESIGN.md's reports/logs/*.full.txt); pytest's whole output goes to the session log ($(1)).
empty :=
space := $(empty) $(empty)
comma := ,
BASELINE_IDS := $(patsubst cutile,cutile_py,$(strip $(BASELINES)))
UNKNOWN_BASELINES := $(filter-out cutile triton torch,$(BASELINES))
PERF_LOG := $(OUT_ROOT)/{kernel}/reports/logs/perf_{backend}.full.txt
BASELINE_LOG := $(OUT_ROOT)/{kernel}/reports/logs/baseline_perf_{backend}.full.txt
perf_session = scripts/pytest_stage.sh $(1) -- $(2) -k "cutile_rs and test_perf" --print-record -v -rs \
    --timeout=600 --continue-on-collection-errors --stage-log '$(PERF_LOG)' --stage-backends cutile_rs
baseline_session = scripts/pytest_stage.sh $(1) -- $(2) -k "test_perf and ($(subst $(space), or ,$(BASELINE_IDS)))" \
    --print-record -v -rs --timeout=600 --continue-on-collection-errors --stage-log '$(BASELINE_LOG)' \
    --stage-backends $(subst $(space),$(comma),$(BASELINE_IDS))
check_baselines = $(if $(UNKNOWN_BASELINES),{ echo "BASELINES: unknown backend '$(UNKNOWN_BASELINES)' (known: cutile triton torch)" >&2; exit 2; },$(if $(BASELINE_IDS),true,{ echo "BASELINES is empty: name at least one of cutile triton torch" >&2; exit 2; }))
# `make -n` still runs the recipe lines that call $(MAKE) (the KERNEL=all loops); they skip the summary.
DRY_RUN := $(findstring n,$(firstword -$(MAKEFLAGS)))
summary = $(if $(DRY_RUN),true,$(PY) -m tilekit summary --out-root $(OUT_ROOT) $(KERNELS))
# The stage logs a session writes, removed first so that a session that never starts (a bad GPUS)
# leaves no earlier run's log for the report to take as this one's.
stage_files = $(foreach k,$(2),$(foreach b,$(3),$(subst {backend},$(b),$(subst {kernel},$(k),$(1)))))
perf_logs = $(call stage_files,$(PERF_LOG),$(1),cutile_rs)
baseline_logs = $(call stage_files,$(BASELINE_LOG),$(1),$(BASELINES))
# One timed stage ($(1): baseline or perf) over the kernels $(2), pytest's whole output in $(3):
# one session, then each kernel's performance report. Only perf's reports set the status (STRICT=1
# included); a baseline's report is informative. Leaves the status in the shell's rc.
timed_stage = rm -f $(call $(1)_logs,$(2)); \
    $(ENV) $(call $(1)_session,$(3),$(foreach k,$(2),tests/kernels/test_$(k).py)) || rc=$$?; \
    for k in $(2); do \
        $(PY) -m tilekit report --kernel $$k --dir $(OUT_ROOT)/$$k --only performance \
            $(if $(filter perf,$(1)),$(STRICT_FLAG) || { r=$$?; [ $$rc -ne 0 ] || rc=$$r; },|| true); \
    done

.DEFAULT_GOAL := help
.PHONY: help setup doctor build symbols test baseline perf report validate all check bundle clean

help: ## list the targets
	@echo "usage: make [KERNEL=name] [OUT_ROOT=dir] [BASELINES='cutile triton torch'] [STRICT=1] [V=1] <target>"
	@echo
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'
	@echo
	@echo "kernels: $(KERNELS) (KERNEL=all runs a target for each, then writes OUT_ROOT/summary.md)"

setup: ## install Python deps, CUDA >= 13.2 headers and libclang into the cache (idempotent)
	$(Q)bash env/setup.sh

doctor: ## diagnose the environment: cargo, headers, libclang, torch, GPU, tileiras/ptxas/libnvvm
	$(Q)$(ENV) bash env/doctor

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
baseline perf:
	$(Q)$(if $(filter baseline,$@),$(check_baselines),true)
	$(Q)mkdir -p $(OUT_ROOT)/logs $(foreach k,$(KERNELS),$(OUT_ROOT)/$(k)/reports/logs); rm -f $(OUT_ROOT)/logs/$@.build-failed
	$(Q)$(if $(filter perf,$@),$(MAKE) --no-print-directory KERNEL=all build || touch $(OUT_ROOT)/logs/$@.build-failed,true)
	$(Q)rc=0; if [ -e $(OUT_ROOT)/logs/$@.build-failed ]; then rc=2; rm -f $(OUT_ROOT)/logs/$@.build-failed; \
	    echo "make KERNEL=all $@: a build or symbol check failed (above); timing every suite anyway" >&2; fi; \
	$(call timed_stage,$@,$(KERNELS),$(OUT_ROOT)/logs/$@.session.txt); \
	$(summary) || rc=$$?; \
	exit $$rc

all:
	$(Q)$(MAKE) --no-print-directory -k KERNEL=all build test baseline perf validate
else
build: ## cargo build the cdylib (a no-op when no source changed), then the symbol check
	$(Q)mkdir -p $(KDIR)/reports
	$(Q)$(ENV) scripts/build.sh $(KDIR)/reports/build.log
	$(Q)$(MAKE) --no-print-directory symbols

symbols: ## nm -D proves every export declared in kernels/$(KERNEL)/op.py is there (T)
	$(Q)$(ENV) scripts/check_symbols.sh "$$TILEKIT_LIB" $(KERNEL)

test: build ## correctness of the port: pytest -k "cutile_rs and test_op", then reports/correctness.md
	$(Q)mkdir -p $(KDIR)/reports/logs
	$(Q)rc=0; $(ENV) scripts/pytest_stage.sh $(KDIR)/correctness_cutile_rs.txt -- $(KTEST) \
	    -k "cutile_rs and test_op" -v -x --timeout=60 -rs \
	    --junitxml=$(KDIR)/reports/logs/correctness.junit.xml || rc=$$?; \
	$(PY) -m tilekit report --kernel $(KERNEL) --dir $(KDIR) --only correctness $(STRICT_FLAG) || { r=$$?; [ $$rc -ne 0 ] || rc=$$r; }; \
	exit $$rc

baseline: ## CUPTI perf of each baseline in BASELINES (one pytest session) -> baseline_perf_<backend>.txt
	$(Q)$(check_baselines)
	$(Q)mkdir -p $(KDIR)/reports/logs
	$(Q)rc=0; $(call timed_stage,baseline,$(KERNEL),$(KDIR)/reports/logs/baseline.session.txt); exit $$rc

perf: build ## CUPTI perf of the cutile-rs port, then the report
	$(Q)mkdir -p $(KDIR)/reports/logs
	$(Q)rc=0; $(call timed_stage,perf,$(KERNEL),$(KDIR)/reports/logs/perf.session.txt); exit $$rc

report: ## no GPU: re-sanitize the raw logs on disk and re-render both reports
	$(Q)$(PY) -m tilekit report --kernel $(KERNEL) --dir $(KDIR) $(STRICT_FLAG)

validate: ## check every output file of the kernel; prints a <VALIDATOR_OUTPUT> block
	$(Q)$(PY) -m tilekit validate --kernel $(KERNEL) --dir $(KDIR) --baselines "$(BASELINES)"

all: ## build test baseline perf validate
	$(Q)$(MAKE) --no-print-directory build test baseline perf validate
endif

check: ## the kit's own tests: Rust (kernels lowered and assembled for sm_90 on the CPU), then pytest (GPU tests skip with their reason)
	$(Q)$(ENV) scripts/build.sh build/check-build.log
	$(Q)$(ENV) scripts/cargo_test.sh
	$(Q)$(PY) -m pytest tests -q -rs

bundle: build ## tarball to run test/baseline/perf/report on a GPU host without Rust or internet -> dist/
	$(Q)$(ENV) scripts/bundle.sh

clean: ## remove build/ and $(OUT_ROOT)/ (the cargo cache outside the repo stays)
	rm -rf build $(OUT_ROOT)
