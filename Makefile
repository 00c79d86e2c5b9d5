# The course's commands. `make grade` is the instructor's main job, `make test` what CI runs.
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)
ASSIGNMENT ?= grayscale

.PHONY: setup release grade feedback test lab clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

release: setup  ## source/ -> release/ through nbgrader (solutions out, C stubs in)
	nbgrader generate_assignment $(ASSIGNMENT) --force

grade: release  ## autograde the example submissions, print the grade table, re-verify in clean processes
	$(PY) -m course.grading.submissions $(ASSIGNMENT)
	nbgrader autograde $(ASSIGNMENT) --create --force
	$(PY) -m course.grading.gradebook $(ASSIGNMENT)
	$(PY) -m course.grading.verify $(ASSIGNMENT)

feedback: ## the HTML feedback students get, from the last autograde
	nbgrader generate_feedback $(ASSIGNMENT) --force

test: setup  ## unit tests, the nbgrader pipeline, and nbval over source/
	$(PY) -m pytest tests
	$(PY) -m pytest --nbval-lax source

lab: setup  ## open the course in JupyterLab
	jupyter lab release

clean:
	rm -rf submitted autograded/* feedback gradebook.db .nbgrader.log
