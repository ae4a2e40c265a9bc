# Attention Lab. `make lab` opens the chapter; `make test` runs every test, notebooks included.
# Both create .venv and install the pinned versions from constraints.txt on first use: `make lab`
# what the chapter needs (the package and its lab extra), `make test` also the test tools.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Two installs, each remembered by a stamp file: LAB_STAMP for what a reader needs (.[lab], and
# for the Chinese edition .[lab,zh]: JupyterLab's menus in Chinese), TEST_STAMP for everything
# the tests and the maintainers' tools need (.[lab,test,zh,class]), a superset of both.
LAB_STAMP  = $(VENV)/.installed-lab$(if $(LANG_EDITION),-$(LANG_EDITION))
TEST_STAMP := $(VENV)/.installed-test
PIP    := $(BIN)/python -m pip
# Jupyter refuses to start as root unless told to (containers, some cloud machines).
ROOT_ARGS := $(if $(filter 0,$(shell id -u)),--allow-root)
JOBS ?= auto
# The same numbers on every x86 machine: training for hundreds of steps amplifies the last
# bit of a sum, and PyTorch and MKL pick their kernels by CPU (an AVX-512 machine trains
# 09's one-head trigram runs to other step counts than an AVX2 one). Every notebook run and
# test pins the AVX2 code paths, which every x86 machine this course targets has, so the stored
# outputs are what nbval sees anywhere (tools/run_notebooks.py sets the same when run directly).
export ATEN_CPU_CAPABILITY := avx2
export MKL_CBWR := AVX2
PYTEST_NB := --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg \
             --ignore-glob='*/.ipynb_checkpoints/*'

.PHONY: help lab lab-zh slides slides-html test test-colab unit nbval lint format demo bench test-hub \
        explore exercises assignment badges notebooks translations clean

# `make lab LANG_EDITION=zh-CN` (or `make lab-zh`) opens the Simplified Chinese edition.
LANG_EDITION ?=
LAB_DIR := notebooks$(if $(LANG_EDITION),/$(LANG_EDITION))
# The Chinese edition also puts JupyterLab's own menus in Chinese (the zh extra's language pack).
LANG_ARGS := $(if $(LANG_EDITION),--LabApp.user_settings_dir=$(CURDIR)/share/jupyter/lab-$(LANG_EDITION))

help:
	@echo "make lab        set up .venv with what the chapter needs and open it in JupyterLab"
	@echo "make test       add the test tools to .venv and run ruff, the unit tests and nbval"
	@echo "make lock       rewrite constraints.txt from pyproject.toml (after changing a range there)"
	@echo "make test-hub   the classroom hub's tests (root: creates and removes system users)"
	@echo "make test-colab the explorer under Colab's ipywidgets 7.7.1 (a second venv, .venv-colab)"
	@echo "make demo       train the copy task from the command line (python -m attention_lab demo)"
	@echo "make bench      measure speed and memory of every implementation; writes bench-results/"
	@echo "make explore    serve the interactive explorer as an app with Voila (#presenter: big text)"
	@echo "make exercises  regenerate the learner exercises notebook from the solutions"
	@echo "make assignment the exercises as an nbgrader assignment in build/course (teaching/grading.md)"
	@echo "make grade      (root) collect the students' notebooks and grade each in a sandbox (teaching/grading.md)"
	@echo "make badges     rewrite Colab badges and install lines from pyproject's Repository URL"
	@echo "make notebooks  re-run every notebook top to bottom and save its outputs"
	@echo "make slides     open the chapter in JupyterLab to present: Run All, then Alt+R"
	@echo "make slides-html  offline slide decks and the summary sheet in build/ (no Python needed)"
	@echo "make translations  update i18n/zh_CN/*.po from the English and rebuild notebooks/zh-CN/"
	@echo "make lab-zh     open the Simplified Chinese edition (= make lab LANG_EDITION=zh-CN)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Which build of PyTorch: TORCH_STEP, run before the install. PyPI's torch for Linux is the CUDA
# build, 2.7 GB of wheels where the CPU build is 0.2 GB. TORCH=auto takes the CPU build on Linux
# without an NVIDIA GPU (no nvidia-smi, no /proc/driver/nvidia) and leaves torch to pip elsewhere;
# TORCH=cpu or TORCH=cuda forces one build (also in an existing .venv); TORCH=default leaves torch
# to pip. The CPU build comes from what pip has without the network (installed, or in a
# --find-links folder), else from TORCH_CPU_INDEX if it answers within 5 s, else torch comes from
# pip's own index with the rest. Where pip is set to an index other than PyPI's (a mirror, README
# "Start"), auto asks no other host: torch is the mirror's, PyPI's build. One line says which.
TORCH ?= auto
TORCH_CHOICE := $(VENV)/.torch-$(TORCH)
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
PYPI ?= https://pypi.org/simple
SYSTEM ?= $(shell uname -s)
NVIDIA ?= $(wildcard /proc/driver/nvidia)$(shell command -v nvidia-smi)
TORCH_PIN := $(shell sed -n 's/^torch==\([^ ;]*\).*/\1/p' constraints.txt)
TORCH_BUILD := $(if $(filter auto,$(TORCH)),$(if $(and $(filter Linux,$(SYSTEM)),$(if $(NVIDIA),,no-gpu)),cpu,pip),$(TORCH))
TORCH_CPU = $(PIP) install --quiet --no-deps -c constraints.txt "torch==$(TORCH_PIN)+cpu"
# The index pip installs from: PIP_INDEX_URL, else index-url in pip.conf's [install], else [global].
PIP_INDEX = $(PIP) config list | sed -n -e "s/^:env:\.index-url='\(.*\)'/0\1/p" \
	-e "s/^install\.index-url='\(.*\)'/1\1/p" -e "s/^global\.index-url='\(.*\)'/2\1/p" | sort | sed -n '1s/^.//p'
# Why the CPU index does not answer within 5 s (nothing when it does).
TORCH_PROBE = $(BIN)/python -c "import urllib.request as u; u.urlopen('$(TORCH_CPU_INDEX)/torch/', timeout=5)" 2>&1 | tail -n 1
TORCH_STEP = case $(TORCH_BUILD) in \
	pip|default) echo "torch: from pip's index with the rest (TORCH=$(TORCH))";; \
	cuda) if $(PIP) show torch 2>/dev/null | grep -q '^Version: .*+cpu'; then $(PIP) uninstall --quiet --yes torch; \
		echo "torch: the CPU build removed; PyPI's comes next"; else echo "torch: PyPI's build (TORCH=cuda)"; fi;; \
	cpu) if $(TORCH_CPU) --no-index 2>/dev/null; then echo "torch: the CPU build $(TORCH_PIN)+cpu, found without the network"; \
	elif [ $(TORCH) = auto ] && index=$$($(PIP_INDEX)) && [ -n "$$index" ] && [ "$${index%/}" != "$(PYPI)" ]; then \
		echo "torch: from pip's index $$index with the rest (PyPI's build, CUDA on Linux); TORCH=cpu asks $(TORCH_CPU_INDEX)"; \
	elif why=$$($(TORCH_PROBE)) && [ -n "$$why" ]; then \
		echo "torch: the CPU index $(TORCH_CPU_INDEX) is unreachable ($${why\#*: }); torch comes from the default index instead"; \
	elif $(TORCH_CPU) --index-url $(TORCH_CPU_INDEX); then echo "torch: the CPU build, from $(TORCH_CPU_INDEX)"; \
	else echo "torch: no CPU build of torch $(TORCH_PIN) for this Python at $(TORCH_CPU_INDEX); torch comes from the default index instead"; fi;; \
	*) echo "TORCH=$(TORCH): expected auto, cpu, cuda or default"; exit 1;; \
	esac

$(TORCH_CHOICE): | $(BIN)/python
	@rm -f $(VENV)/.torch-*
	@touch $@

# Both stamps are made by one recipe with their own extras. The test install also holds all
# that the lab installs do, so it touches their stamps too: `make lab` after `make test` starts
# at once.
$(VENV)/.installed-lab: EXTRAS := lab
$(VENV)/.installed-lab-zh-CN: EXTRAS := lab,zh
$(TEST_STAMP): EXTRAS := lab,test,zh,class
$(VENV)/.installed-lab $(VENV)/.installed-lab-zh-CN $(TEST_STAMP): \
		$(BIN)/python pyproject.toml constraints.txt $(TORCH_CHOICE)
	@$(TORCH_STEP)
	$(PIP) install --quiet -c constraints.txt -e ".[$(EXTRAS)]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	@bash tools/lighten_venv.sh $(BIN)/python
	@touch $@ $(if $(filter $(TEST_STAMP),$@),$(VENV)/.installed-lab $(VENV)/.installed-lab-zh-CN)

# `make lock` rewrites constraints.txt from pyproject.toml (every extra) and tools/lock.in (the
# torch release, and what binder/ installs beside the package) with uv's universal resolver:
# one file for Python 3.10+ on Linux, macOS and Windows, with a marker where a version differs
# (each Python gets the newest release that supports it). The pins there now are kept wherever
# they still fit; LOCK_ARGS=--upgrade (or --upgrade-package NAME) moves them.
UV_VERSION := 0.13.9
LOCK_ARGS ?=
.PHONY: lock
lock: $(BIN)/python
	$(PIP) install --quiet uv==$(UV_VERSION)
	cp constraints.txt $(VENV)/lock.txt
	$(BIN)/uv pip compile --quiet --no-python-downloads pyproject.toml tools/lock.in \
	    --all-extras --universal --python-version 3.10 --no-header --annotation-style line \
	    $(LOCK_ARGS) -o $(VENV)/lock.txt
	{ awk '!/^#/ {exit} {print}' constraints.txt; cat $(VENV)/lock.txt; } > $(VENV)/lock-new.txt
	@if cmp -s $(VENV)/lock-new.txt constraints.txt; then echo "constraints.txt: already current"; \
	else mv $(VENV)/lock-new.txt constraints.txt; git diff --stat -- constraints.txt 2>/dev/null || true; fi

lab: $(LAB_STAMP)
	@test -d $(LAB_DIR) || { echo "$(LAB_DIR) does not exist: run make translations"; exit 1; }
	cd $(LAB_DIR) && $(CURDIR)/$(BIN)/jupyter lab 01_weighted_average.ipynb $(ROOT_ARGS) $(LANG_ARGS) $(LAB_ARGS)

lab-zh:
	$(MAKE) lab LANG_EDITION=zh-CN

slides: $(LAB_STAMP)
	cd notebooks && ../$(BIN)/jupyter lab 01_weighted_average.ipynb \
	    --LabApp.app_settings_dir=$(CURDIR)/teaching/jupyterlab-settings $(ROOT_ARGS) $(LAB_ARGS)

slides-html: $(TEST_STAMP)
	$(BIN)/python -m tools.slides html
	$(BIN)/python -m tools.summary_sheet --out build/teaching --pdf

# Unit tests and nbval run on every core (pytest-xdist; a notebook stays on one worker);
# the tests marked browser (real browser, real servers) run afterwards on their own, so the
# times they print are a quiet machine's, not ones taken while other notebooks compete for
# the cores. `make test` creates no system user: the classroom hub's tests (marker hub) run
# only under `make test-hub` (root; .ci/run calls it). Markers: [tool.pytest.ini_options].
# The notebooks' kernels train each model once per run: the Chinese edition, and notebook 11
# (notebook 10's model is its positive control), load what the first kernel to train it
# stored (src/attention_lab/train_once.py, a folder removed at the end). The unit tests train
# every model they ask for (tests/conftest.py).
test: $(TEST_STAMP)
	$(BIN)/python -m ruff check src tests tools notebooks
	$(BIN)/python -m ruff format --check src tests tools
	store=$$(mktemp -d) && trap 'rm -rf "$$store"' EXIT && export ATTENTION_LAB_TRAIN_ONCE=$$store && \
	$(BIN)/python -m pytest -m "not browser and not hub" -n $(JOBS) --dist loadfile tests notebooks $(PYTEST_NB) && \
	$(BIN)/python -m pytest -m "browser and not hub" -s tests

# The classroom JupyterHub for real (hub/README.md): a class of five, an intruder and the
# red team's attacks. As root it creates system users (alab-*) and removes them afterwards.
# Three workers: the grading tests, both red-team rounds on one shared hub (tests/conftest.py
# keeps those files together) and the class tests on a hub of their own; the longest, the
# red team's, sets the time (about 170 s on a quiet 2-core machine, where two workers took
# about 175 s). -rP prints what each test measured. Only tests/hub/test_hub*.py are
# collected (conftest.py stops any collection that finds the hub marker elsewhere).
test-hub: $(TEST_STAMP)
	$(BIN)/python -m pytest -m hub -n 3 --dist loadfile -rP tests/hub/test_hub*.py

test-colab: $(TEST_STAMP)
	PYTHON=$(PYTHON) bash tools/colab_widgets_check.sh

unit: $(TEST_STAMP)
	$(BIN)/python -m pytest -m "not browser and not hub" tests

nbval: $(TEST_STAMP)
	$(BIN)/python -m pytest notebooks $(PYTEST_NB)

lint: $(TEST_STAMP)
	$(BIN)/python -m ruff check src tests tools notebooks
	$(BIN)/python -m ruff format --check src tests tools

format: $(TEST_STAMP)
	$(BIN)/python -m ruff format src tests tools
	$(BIN)/python -m ruff check --fix src tests tools notebooks

demo: $(LAB_STAMP)
	$(BIN)/python -m attention_lab demo

bench: $(LAB_STAMP)
	$(BIN)/python -m attention_lab bench
	$(MAKE) bench-capacity

# The classroom JupyterHub (hub/README.md): its own venv at a path every student can execute
# (HUB_VENV), the proxy from hub/package-lock.json, then the hub on 127.0.0.1:8000, as root.
HUB_VENV ?= /opt/attention-lab-hub/venv
.PHONY: hub hub-env hub-admin bench-capacity
hub-env:
	HUB_VENV=$(HUB_VENV) bash tools/hub_env.sh

# The admin's password, asked twice, written into the hub's database before the hub listens
# (`make hub` refuses to start without it; a sign-up under the admin's name is refused).
hub-admin: hub-env
	@test "$$(id -u)" = 0 || { echo "make hub-admin runs as root: the hub's state is root's"; exit 1; }
	$(HUB_VENV)/bin/python hub/classroom_hub.py admin-password

hub: hub-env
	@test "$$(id -u)" = 0 || { echo "make hub runs as root: it starts each student's server as their own user"; exit 1; }
	HUB_VENV=$(HUB_VENV) $(HUB_VENV)/bin/jupyterhub -f $(CURDIR)/hub/jupyterhub_config.py

# Memory and CPU of one student's server per notebook, and 1, 2, 4 students running 08 at
# once, on a private hub (root only; skipped otherwise): teaching/README.md, "Running it for a class".
bench-capacity: $(LAB_STAMP)
	@if [ "$$(id -u)" = 0 ]; then HUB_VENV=$(HUB_VENV) $(BIN)/python hub/classroom/capacity.py; \
	else echo "bench-capacity: skipped (needs root to create the students' system users)"; fi

explore: $(LAB_STAMP)
	JUPYTER_PATH=$(CURDIR)/share/jupyter $(BIN)/voila notebooks/explorer.ipynb \
	    --Voila.ip=127.0.0.1 --template=attention-lab

exercises: $(TEST_STAMP)
	$(BIN)/python -m tools.make_exercises

# The exercises as an nbgrader assignment (teaching/grading.md): the source version made from
# the solutions notebook, then nbgrader's release version, in $(COURSE) (run nbgrader from
# there; it calls `alembic`, hence the venv on PATH). LANG_EDITION=zh-CN makes the Chinese
# one, attention_lab_zh, from notebooks/zh-CN/exercises_solutions.ipynb, in the same course.
COURSE ?= build/course
ASSIGNMENT_NAME = $(if $(filter zh-CN,$(LANG_EDITION)),attention_lab_zh,attention_lab)
# The course folder is private (mode 0700, files 0600): it holds the solutions, the gradebook and
# every submission.
assignment: $(TEST_STAMP)
	$(BIN)/python -m tools.make_assignment --course $(COURSE) --edition $(or $(LANG_EDITION),en)
	cd $(COURSE) && umask 077 && PATH="$(CURDIR)/$(BIN):$$PATH" nbgrader generate_assignment $(ASSIGNMENT_NAME) --force

# Grade the class (teaching/grading.md; root): each student's ~/assignments/<assignment>/ on the
# hub collected without following links, each notebook's kernel run in a sandbox of its own
# (hub/grading/sandbox.py: a throwaway user, bubblewrap, no network, memory and time limits),
# then feedback pages with the scores and the checkers' verdicts only. hub-env first: the kernels
# run the hub's venv, with this checkout's attention_lab. GRADE_ARGS: e.g. --return-feedback,
# --student alice, --from DIR (returned notebooks), --release (hand the assignment out).
GRADE_ARGS ?=
.PHONY: grade
grade: $(TEST_STAMP) hub-env
	@test "$$(id -u)" = 0 || { echo "make grade runs as root: it runs each notebook as a throwaway user"; exit 1; }
	HUB_VENV=$(HUB_VENV) $(BIN)/python hub/grading/grade.py --course $(COURSE) --venv $(HUB_VENV) $(GRADE_ARGS) $(ASSIGNMENT_NAME)

badges: $(TEST_STAMP)
	$(BIN)/python -m tools.badges

notebooks: $(TEST_STAMP)
	$(BIN)/python -m tools.run_notebooks

translations: $(TEST_STAMP)
	$(BIN)/python -m tools.translations update
	$(BIN)/python -m tools.translations build --run
	$(BIN)/python -m tools.translations check
	$(BIN)/python -m tools.translations glossary-check

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis src/*.egg-info
