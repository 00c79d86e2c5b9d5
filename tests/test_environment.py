"""environment.yml (conda) installs the same packages as pyproject.toml (pip), and the test runner groups as `make test` needs."""
import re
import subprocess
import sys
import tomllib

from tests.support import ROOT


def names(requirements):
    return {re.split(r"[<>=!~\[ ;]", r.strip(), maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def test_environment_yml_names_the_same_packages_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = names(project["dependencies"]) | names(r for extra in project["optional-dependencies"].values() for r in extra)
    lines = (ROOT / "environment.yml").read_text().splitlines()
    start = lines.index("  - pip:") + 1
    pip_block = [line.strip()[2:] for line in lines[start:] if line.strip().startswith("- ")]
    assert names(pip_block) == wanted


def test_xdist_keeps_a_group_on_one_worker(tmp_path):
    # `make test` relies on --dist loadgroup: a notebook's cells share a kernel, a shared fixture is built once.
    # (pytest 9.2 moved the node id that pytest-xdist 3.8 rewrites, and groups were silently ignored.)
    (tmp_path / "test_g.py").write_text(
        "import os, pytest\n"
        "@pytest.mark.xdist_group('one')\n"
        "@pytest.mark.parametrize('i', range(6))\n"
        "def test_g(i):\n"
        "    open(f'w{i}', 'w').write(os.environ['PYTEST_XDIST_WORKER'])\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist",
                           "loadgroup", "test_g.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len({(tmp_path / f"w{i}").read_text() for i in range(6)}) == 1
