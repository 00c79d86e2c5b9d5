# The course's commands. `make grade` is the instructor's main job, `make test` what CI runs.
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)
ASSIGNMENTS ?= $(notdir $(wildcard source/*))
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: setup release grade feedback test lab clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

release: setup  ## source/ -> release/ through nbgrader (solutions out, C stubs in), every assignment
	for a in $(ASSIGNMENTS); do nbgrader generate_assignment $$a --force || exit 1; done

grade: release  ## autograde the example submissions, print the grade tables, re-verify in clean processes
	for a in $(ASSIGNMENTS); do \
	  $(PY) -m course.grading.submissions $$a && nbgrader autograde $$a --create --force && \
	  $(PY) -m course.grading.gradebook $$a && $(PY) -m course.grading.verify $$a || exit 1; done

feedback: ## the HTML feedback students get, from the last autograde
	for a in $(ASSIGNMENTS); do nbgrader generate_feedback $$a --force || exit 1; done

test: setup  ## unit tests, the nbgrader pipeline, the corpus, the browser, then nbval over source/ (both cores each)
	$(PY) -m pytest tests -n $(JOBS) --dist loadgroup --durations=15
	$(PY) -m pytest --nbval-lax source -n $(JOBS) --dist loadfile

lab: setup  ## open the course in JupyterLab
	jupyter lab release

clean:
	rm -rf submitted autograded/* feedback gradebook.db .nbgrader.log
