"""environment.yml (conda) installs the same packages as pyproject.toml (pip)."""
import re
import tomllib

from tests.test_release import ROOT


def names(requirements):
    return {re.split(r"[<>=!~\[ ;]", r.strip(), maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def test_environment_yml_names_the_same_packages_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = names(project["dependencies"]) | names(r for extra in project["optional-dependencies"].values() for r in extra)
    lines = (ROOT / "environment.yml").read_text().splitlines()
    start = lines.index("  - pip:") + 1
    pip_block = [line.strip()[2:] for line in lines[start:] if line.strip().startswith("- ")]
    assert names(pip_block) == wanted
