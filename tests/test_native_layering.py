"""The compiled extension's modules (native/src/*.rs) are layered: no module cycle.

Read from the source: a module uses another where its code names `crate::other`
(a `use crate::other::...` line, a `use crate::{a, b}` group, or a path written inline).
The graph of those uses must have no cycle, so that each module can be read, tested and
changed from the ones below it (primitives -> domain -> Python bindings,
native/src/lib.rs and docs/architecture.md). lib.rs is the root: it declares and
registers the modules, and no module reaches into it."""

import re
from pathlib import Path


SRC = Path(__file__).resolve().parent.parent / "native" / "src"
ROOT = "lib"

_USE = re.compile(r"\bcrate::(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)")


def _code(text: str) -> str:
    """The source without its comments (a comment may name a module it does not use)."""
    return re.sub(r"//[^\n]*", "", text)


def uses(text: str) -> set[str]:
    """The names a module's code reaches through `crate::`, first path segment each."""
    found = set()
    for target in _USE.findall(_code(text)):
        if target.startswith("{"):
            found.update(part.strip().split("::")[0] for part in target[1:-1].split(",")
                         if part.strip())
        else:
            found.add(target)
    return found


def module_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Each module (a file of src) and the modules it uses (the root lib.rs left out)."""
    return {path.stem: uses(path.read_text()) for path in sorted(src.glob("*.rs"))
            if path.stem != ROOT}


def a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as the modules along it (the first repeated at the end), or
    None when it has none."""
    done, path = set(), []

    def visit(node):
        if node in path:
            return path[path.index(node):] + [node]
        if node in done or node not in graph:
            return None
        path.append(node)
        for used in sorted(graph[node]):
            cycle = visit(used)
            if cycle:
                return cycle
        path.pop()
        done.add(node)
        return None

    for node in sorted(graph):
        cycle = visit(node)
        if cycle:
            return cycle
    return None


def test_the_native_modules_use_one_another_without_a_cycle():
    graph = module_graph()
    cycle = a_cycle(graph)
    assert cycle is None, "a module cycle in native/src: " + " -> ".join(cycle)


def test_every_crate_path_names_a_module_never_the_root():
    graph = module_graph()
    for module, used in graph.items():
        strays = sorted(used - graph.keys())
        assert not strays, (f"native/src/{module}.rs reaches crate::{strays[0]}, which is no "
                            f"module: items of lib.rs (the root) are not for modules to use")


def test_lib_declares_every_module_file():
    declared = set(re.findall(r"^mod ([a-z_0-9]+);", (SRC / "lib.rs").read_text(), re.M))
    assert declared == set(module_graph())


def test_the_check_reads_every_form_of_use_and_finds_a_cycle():
    text = "\n".join([
        "use crate::hashing::FxMap;",
        "use crate::{names::Sym, event};",
        "// crate::commented is no use",
        "let x = crate::schema::named(&A, 0, \"a\");",
    ])
    assert uses(text) == {"hashing", "names", "event", "schema"}
    assert a_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert a_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert a_cycle({"a": {"a"}}) == ["a", "a"]


def test_the_graph_holds_the_modules_and_their_uses():
    graph = module_graph()
    # the engine's layers, as lib.rs draws them (one edge of each kind is enough to show
    # that the reading found them)
    assert {"hashing", "names", "event", "state", "reassembly", "py_engine",
            "state_codec"} <= graph.keys()
    assert "hashing" in graph["names"] and "reassembly" in graph["py_engine"]
    assert graph["hashing"] == set()
