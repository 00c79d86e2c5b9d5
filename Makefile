# The course's commands. `make grade` is the instructor's main job, `make test` what CI runs.
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)
ASSIGNMENTS ?= $(notdir $(wildcard source/*))
# one test worker a core (a third on the 2-core machine made `make test` slower)
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# the assignments with example submissions (make grade grades them)
EXAMPLES ?= $(notdir $(wildcard examples/*))

.PHONY: setup release grade feedback test lab clean

setup: $(VENV)/.installed

# pip compiles every .py it installs (a minute of one core): leave it: where PYTHONDONTWRITEBYTECODE=1 nothing else
# would, and every process importing torch would compile it again
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

release: setup  ## source/ -> release/ through nbgrader (solutions out, C stubs in and compiled), every assignment
	$(PY) -m course release

# each assignment it grades is released first, and only those (make grade EXAMPLES=rowsoftmax releases one)
grade: setup  ## the example submissions graded (several students at once, resumable, every test judged outside the kernel), grade tables
	for a in $(EXAMPLES); do \
	  $(PY) -m course release $$a && $(PY) -m course examples $$a && $(PY) -m course grade $$a && \
	  $(PY) -m course examples $$a --table || exit 1; done

feedback: ## the HTML feedback students get (no hidden test's code or seed), grades and pass rates exported
	for a in $(EXAMPLES); do $(PY) -m course feedback $$a && $(PY) -m course export $$a || exit 1; done

# a worker that dies (pytest-timeout's thread method ends the whole worker) stops the run: a replaced worker left
# xdist's loadgroup waiting forever for its group (2026-12-05: CI hung past its 90 minutes)
test: setup  ## unit tests, the corpus, nbgrader end to end, the browser and every source notebook (nbval), one session on every core
	$(PY) -m pytest tests source --nbval-lax -n $(JOBS) --dist loadgroup --max-worker-restart=0 --durations=60

lab: setup  ## open the course in JupyterLab
	jupyter lab release

clean:
	rm -rf submitted autograded/* feedback gradebook.db .nbgrader.log
