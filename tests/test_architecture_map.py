"""docs/architecture.md is the map of the code: every module is on it.

A newcomer reads the map to find where a thing lives; a module it does not name is one they
will not find, and the map drifts a little with each module added unnoticed (issue 25 found
32 missing). So each Python module of the project's folders and each file of the compiled
core must be named on the map by its file name (`clients.py`, `tally.rs`), and the map names
no module that is gone."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "docs" / "architecture.md"
PYTHON_FOLDERS = ("parsers", "streams", "probes", "report", "simulator", "dpmstream", "scripts")


def project_modules() -> set[str]:
    """The file names of the project's modules: Python (package markers aside) and Rust."""
    found = {path.name for folder in PYTHON_FOLDERS for path in (ROOT / folder).rglob("*.py")
             if path.name != "__init__.py"}
    found.update(path.name for path in (ROOT / "native" / "src").glob("*.rs"))
    return found


def named_on_map(text: str) -> set[str]:
    """The module file names the map writes (`name.py`, `path/name.rs`, in backticks or not).
    A name with a placeholder in capitals (`NAME_profiles.py`: a file to add) is none."""
    return {Path(name).name for name in re.findall(r"[\w/.-]*\w\.(?:py|rs)\b", text)
            if not re.search(r"[A-Z]{3,}", Path(name).stem)}


def test_every_module_of_the_project_is_named_on_the_map():
    missing = sorted(project_modules() - named_on_map(MAP.read_text()))
    assert not missing, f"docs/architecture.md does not name: {', '.join(missing)}"


def test_the_map_names_no_module_that_is_gone():
    tests_and_benches = {path.name for folder in ("tests", "bench")
                         for path in (ROOT / folder).rglob("*.py")}
    gone = sorted(named_on_map(MAP.read_text()) - project_modules() - tests_and_benches)
    assert not gone, f"docs/architecture.md names modules that do not exist: {', '.join(gone)}"
