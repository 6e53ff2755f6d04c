"""The edges use the domain's public API only (docs/architecture.md, "The domain's public
API"): no module of streams/, probes/, dpmstream/ (the commands), report/ or simulator/
touches a private name of parsers/: no `obj._name` where parsers/ defines `_name` (a
method, an attribute, a slot), no getattr of one, no import of a private name or module.

Read from the source (ast), so that a reach is caught before it runs. The one private
module an edge may import is the compiled extension `parsers._native`: besides the
domain's engines it holds the compiled edges (block.rs, envelope.rs, records.rs,
tally.rs), each a module of its own (tests/test_native_layering.py)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOMAIN = ROOT / "parsers"
EDGES = ("streams", "probes", "dpmstream", "report", "simulator")
ALLOWED_MODULES = {"_native"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def domain_private_names(files) -> set[str]:
    """Every private name parsers/ defines: module names, functions, methods, classes,
    attributes it sets or reads on an object, slots."""
    names = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                candidates = [node.name]
            elif isinstance(node, ast.Attribute):
                candidates = [node.attr]
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                candidates = [node.id]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                candidates = [node.value]  # __slots__ entries, getattr names
            else:
                continue
            names.update(n for n in candidates if n.isidentifier() and _private(n))
        if _private(path.stem):
            names.add(path.stem)
    return names


def reaches(source: str, where: str, private: set[str]) -> list[str]:
    """The places in an edge module's source that touch a private name of the domain."""
    found = []
    for node in ast.walk(ast.parse(source, where)):
        at = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and node.attr in private:
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{at}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("getattr", "setattr", "hasattr", "delattr") \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and node.args[1].value in private:
            found.append(f"{at}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split(".")[:2] == ["dpmstream", "parsers"]:
            modules = node.module.split(".")[2:]
            for part in modules:
                if _private(part) and part not in ALLOWED_MODULES:
                    found.append(f"{at}: from {node.module} import ...")
            for alias in node.names:
                if _private(alias.name) and alias.name not in ALLOWED_MODULES:
                    found.append(f"{at}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[:2] == ["dpmstream", "parsers"] and any(
                        _private(p) and p not in ALLOWED_MODULES for p in parts[2:]):
                    found.append(f"{at}: import {alias.name}")
    return sorted(found, key=lambda f: int(f.split(":")[1]))


def edge_files():
    for edge in EDGES:
        yield from sorted((ROOT / edge).rglob("*.py"))


PRIVATE = domain_private_names(sorted(DOMAIN.glob("*.py")))


def test_no_edge_module_touches_a_private_name_of_the_domain():
    found = []
    for path in edge_files():
        found += reaches(path.read_text(), str(path.relative_to(ROOT)), PRIVATE)
    assert not found, ("edges reaching into parsers/ (give the domain a public name for "
                       "what they need):\n" + "\n".join(found))


def test_the_check_sees_the_edges_and_the_domains_private_names():
    assert len(list(edge_files())) > 50
    # names the edges once reached for (issue 25)
    assert {"_compiled", "_fast", "_pending", "_since_advance", "_register", "_linker"} <= PRIVATE


def test_the_check_catches_each_kind_of_reach():
    source = "\n".join([
        "from dpmstream.parsers.pipeline import Pipeline, _helper",
        "from dpmstream.parsers._private_mod import thing",
        "import dpmstream.parsers._private_mod",
        "from dpmstream.parsers._native import LineBlock",  # allowed: the extension
        "n = src.line_no + len(src._pending)",
        "compiled = getattr(parser, '_compiled')",
        "stats._linker = None",
        "self._pending = []",  # the edge's own: fine
    ])
    found = reaches(source, "edge.py", {"_pending", "_compiled", "_linker", "_helper"})
    assert [f.split(": ", 1)[1] for f in found] == [
        "from dpmstream.parsers.pipeline import _helper",
        "from dpmstream.parsers._private_mod import ...",
        "import dpmstream.parsers._private_mod",
        "src._pending",
        "getattr(parser, '_compiled')",
        "stats._linker",
    ], found
