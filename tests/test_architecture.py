"""The import contract of ARCHITECTURE.md: layers, no cycles, one concept per module, a pure
decision layer, standalone scripts that import nothing of gpuresolve.

The graph counts every import at any depth (inside functions and TYPE_CHECKING blocks too): a
cycle kept alive by a lazy import is still a cycle in the design. Each module belongs to the
layer of its longest prefix in LAYERS; a module no prefix covers fails the test, so a new
folder or top-level module must be placed on purpose.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from resolver.core.errors import (
    EXIT_INTERNAL,
    DataError,
    GpuresolveError,
    IndexFormatError,
    UserError,
    exit_code,
)
from resolver.core.vocab import CondaSource, DriverPolicy, EvidenceLevel, Grade, LockFormat
from resolver.core.vocab import words as vocab_words
from resolver.dbupdate.metadata import MetadataError
from resolver.io.http import FetchError

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "resolver"
# One concept per module, named in its docstring's first line; a module past this many lines
# says in its docstring why it is still one concept (a paragraph starting "One concept:").
LONG_MODULE = 800
ONE_CONCEPT = "One concept:"

CORE, IO, DATA, DECISION, EFFECTS, FLOWS, COMMANDS = range(7)
LAYERS: dict[str, int] = {
    "resolver": CORE,  # the package's __init__: the version string only
    "resolver.core": CORE,  # errors, versions, platforms, the host profile record
    "resolver.core.documents": CORE,  # the --json documents' TypedDicts (types only)
    "resolver.standalone": CORE,  # scripts for other interpreters: they import nothing of ours
    "resolver.io": IO,  # HTTP, remote zip, bounded readers, atomic writes
    "resolver.db": DATA,
    "resolver.catalog": DATA,  # the database's facade
    "resolver.host": DATA,  # probes of this machine
    "resolver.wheels": DATA,  # probes of a wheel's bytes, index pages
    "resolver.markers": DATA,
    "resolver.schemas": DATA,  # the published JSON Schemas (files beside the module)
    "resolver.solve": DECISION,  # solver, hints, explain, inputs, conda adapter, fleet
    "resolver.images": DECISION,
    "resolver.writers": EFFECTS,
    "resolver.readers": EFFECTS,
    "resolver.install": EFFECTS,
    "resolver.verify": EFFECTS,
    "resolver.observe": EFFECTS,
    "resolver.dbupdate": EFFECTS,
    "resolver.team": EFFECTS,  # team specs: read, expanded into fleet targets
    "resolver.fleet": EFFECTS,  # node lists read, verification Jobs and scripts, results judged
    "resolver.present": EFFECTS,  # the sentences of a decision's records, --explain
    "resolver.dbshow": EFFECTS,
    "resolver.flows": FLOWS,  # each job on typed values: target, lock inputs, output folder
    "resolver.commands": COMMANDS,
    "resolver.cli": COMMANDS,
    "resolver.__main__": COMMANDS,
    "resolver.start": COMMANDS,
    "resolver.precommit": COMMANDS,  # the pre-commit hook's program: `lock --check` per lock
}

# Scripts run by other interpreters (the user's, a container image's, a child's): no gpuresolve
# import at all, each with its own Python target in pyproject.toml's ruff settings.
STANDALONE = {
    "resolver.standalone.probe",
    "resolver.standalone.startup",
    "resolver.standalone.nccl_worker",
    "resolver.standalone.rattler_child",
    "resolver.standalone.ext_probe",
}

# The decision layer decides from what it is given: it never probes, reads a file, looks at the
# environment or runs a program. Its folders import none of these, and call none of those.
PURE = ("resolver.solve", "resolver.images")
IMPURE_MODULES = ("resolver.host", "resolver.io.subprocs", "resolver.io.http")
IMPURE_CALLS = frozenset(
    {"open", "read_text", "read_bytes", "write_text", "write_bytes", "glob", "rglob", "iterdir"}
    | {"stat", "lstat", "exists", "is_file", "is_dir", "getenv", "system", "popen"}
)
IMPURE_IMPORTS = ("subprocess", "shutil", "glob", "tempfile")

# Only flows call the solver: the decision layer's entry points (one machine, one build, a
# fleet, conda-forge, the what-ifs), used by no writer, command or reader; the decision layer
# itself (solve/, images/) composes them.
SOLVER = frozenset(
    {"solve", "decide", "evaluate", "FleetSolver", "solve_conda_forge", "solve_fleet"}
    | {"split_groups", "unlocks"}
)
SOLVER_CALLERS = ("resolver.flows", *PURE)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(source: str, mod: str, is_pkg: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``source`` imports, at any depth, relative imports resolved."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names = [prefix, *(f"{prefix}.{a.name}" for a in node.names)]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != mod:
                out.add(name)
    return out


def import_graph(
    root: Path = ROOT, package: str = PACKAGE
) -> tuple[dict[str, set[str]], dict[str, int]]:
    """module -> the modules it imports; and module -> its line count."""
    graph, lines, _ = import_graph_with_docs(root, package)
    return graph, lines


def import_graph_with_docs(
    root: Path = ROOT, package: str = PACKAGE
) -> tuple[dict[str, set[str]], dict[str, int], dict[str, str]]:
    """import_graph, and module -> its docstring ("" where it has none)."""
    files = {module_name(f, root): f for f in sorted((root / package).rglob("*.py"))}
    known = set(files)
    graph: dict[str, set[str]] = {}
    lines: dict[str, int] = {}
    docs: dict[str, str] = {}
    for mod, path in files.items():
        text = path.read_text(encoding="utf-8")
        docs[mod] = ast.get_docstring(ast.parse(text)) or ""
        deps = imports_of(text, mod, path.name == "__init__.py", known)
        if path.name == "__init__.py":  # a package importing its own children is no cycle
            deps = {d for d in deps if not d.startswith(mod + ".")}
        graph[mod] = deps
        lines[mod] = len(text.splitlines())
    return graph, lines, docs


def cycles(graph: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    top = stack.pop()
                    on.discard(top)
                    comp.add(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def package_of(mod: str) -> str:
    """The first-level part of ``resolver`` a module is in: resolver.db.models -> resolver.db."""
    return ".".join(mod.split(".")[:2])


def package_graph(graph: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        src = package_of(mod)
        out.setdefault(src, set()).update(d for d in map(package_of, deps) if d != src)
    return out


def layer_of(mod: str, layers: Mapping[str, int] = LAYERS) -> int | None:
    parts = mod.split(".")
    for end in range(len(parts), 0, -1):
        hit = layers.get(".".join(parts[:end]))
        if hit is not None:
            return hit
    return None


def _within(mod: str, prefixes: Iterable[str]) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def impure_edges(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Imports from the decision layer of a probe, a child process or the network."""
    return [
        f"{mod} imports {dep}: the decision layer never probes, runs or fetches"
        for mod, deps in sorted(graph.items())
        if _within(mod, PURE)
        for dep in sorted(deps)
        if _within(dep, IMPURE_MODULES)
    ]


def impure_calls(source: str, mod: str) -> list[str]:
    """File, environment and process access in ``source``: ``open(``, ``.read_text(``,
    ``.glob(`` and their kin, ``os.environ``, ``subprocess``; one line each."""
    out: list[str] = []
    for node in ast.walk(ast.parse(source)):
        what = None
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else None
            attr = func.attr if isinstance(func, ast.Attribute) else None
            if name == "open" or attr in IMPURE_CALLS:
                what = f"{name or attr}("
        elif isinstance(node, ast.Attribute) and node.attr == "environ":
            what = "os.environ"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            hits = [n for n in names if n.split(".")[0] in IMPURE_IMPORTS]
            what = f"import {hits[0]}" if hits else None
        if what is not None:
            out.append(f"{mod}:{getattr(node, 'lineno', 0)}: {what} in the decision layer")
    return out


# Each vocabulary is one enum (resolver/core/vocab.py); elsewhere its words are never spelled as
# a set (a tuple, a list, Click's choices, a Literal) nor compared with a value that holds one.
VOCABULARIES: dict[str, tuple[frozenset[str], frozenset[str]]] = {  # words, fields that hold one
    vocab.__name__: (frozenset(vocab_words(vocab)), fields)
    for vocab, fields in (
        (DriverPolicy, frozenset({"policy", "driver_policy"})),
        (EvidenceLevel, frozenset({"evidence", "level", "allow"})),
        (Grade, frozenset({"grade", "evidence"})),
        (CondaSource, frozenset({"conda_source"})),
        (LockFormat, frozenset({"format", "formats", "fmt"})),
    )
}
VOCABULARY_HOME = ("resolver.core.vocab", "resolver.standalone")  # the scripts import nothing


def _field(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def vocabulary_literals(source: str, mod: str) -> list[str]:
    """Where a module spells a vocabulary's words itself, instead of naming its enum."""
    if _within(mod, VOCABULARY_HOME):
        return []
    out: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            texts = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            for name, (words_, _fields) in VOCABULARIES.items():
                if len(texts & words_) >= 2:
                    out.append(f"{mod}:{node.lineno}: spells {name}'s words (use the enum)")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            texts = {s.value for s in sides if isinstance(s, ast.Constant)}
            names = {f for s in sides if (f := _field(s)) is not None}
            for name, (words_, fields) in VOCABULARIES.items():
                if texts & words_ and names & fields:
                    out.append(f"{mod}:{node.lineno}: compares with {name}'s word (use the enum)")
    return out


def solver_calls(source: str, mod: str) -> list[str]:
    """Where a module outside the flows (and the decision layer) imports or calls the solver."""
    if _within(mod, SOLVER_CALLERS):
        return []
    out: list[str] = []
    modules: set[str] = set()  # names bound to a module of the decision layer
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _within(node.module, ("resolver.solve",)) and alias.name in SOLVER:
                    out.append(f"{mod}: imports {alias.name} from {node.module} (only flows solve)")
                elif _within(full, ("resolver.solve",)):
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _within(alias.name, ("resolver.solve",)):
                    modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(ast.parse(source)):
        func = node.func if isinstance(node, ast.Call) else None
        if isinstance(func, ast.Attribute) and func.attr in SOLVER:
            base = func.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in modules:
                out.append(f"{mod}: calls {func.attr} (only flows solve)")
    return out


# The decision layer returns data; every sentence is made in resolver.present (ARCHITECTURE.md,
# "Decisions are data"). Building text there is an f-string, ``%``, ``str.format``, a ``+`` or a
# ``.join`` whose own literal text holds a space: that is prose. Text without a space is allowed:
# an identifier, a key or an internal label (``f"{version}+{variant}"``, ``f"{platform}-cpu"``,
# ``"/".join(...)``). What is not converted yet is listed below, function by function, each with
# why; an entry that no longer formats prose fails too, so the list only shrinks.
PROSE_FREE = ("resolver.solve", "resolver.images")
NOT_YET: dict[str, str] = {
    # A GPU's label ("sm_86 (RTX 3090)"), the name the records carry for a GPU.
    "resolver.solve.target.TargetGpu.label": "a GPU's label",
    # Bad input at the text edge: one line on stderr, exit 2 (the error's own message).
    "resolver.solve.inputs._specifier": "a --torch/--with specifier refused",
    "resolver.solve.inputs.build_request": "a request refused",
    "resolver.solve.target.target_from_profile": "a host record's GPU refused; 'GPU 0' named",
    "resolver.solve.conda.conda_forge_catalog": "no conda_forge.yaml refused; the origin's label",
    "resolver.images.facts": "images.yaml read: a bad record refused",
    "resolver.images.reference.parse": "a bad image reference refused",
    # A PEP 508 line (``name @ URL``): a requirement, not prose.
    "resolver.solve.extensions.requirement_line": "a requirement line",
    # The extension gates are data (findings.Misfit), said by present/ext_words.py; some of
    # their values are text that --json's `gates` publish as is.
    "resolver.solve.extensions.choose": "a gate's value: the releases, listed",
    "resolver.solve.extensions._torch_spec": "a gate's value: a release's torch span",
    "resolver.solve.extensions._misfit": "a gate's value: a build's platforms, listed",
    "resolver.solve.extensions._arch_text": "a gate's value: a kernel list",
    "resolver.images.evaluate._official_build": "an unknown official tag refused",
    "resolver.images.evaluate.ngc_report": "an unknown NGC tag or release refused",
    "resolver.images.evaluate.report_for": "an image reference without a known tag refused",
    "resolver.images.evaluate._official_evidence": "an evidence value: the SASS list",
}


def prose(source: str, mod: str) -> dict[str, list[int]]:
    """Where ``source`` builds text with a space in it, by function (``mod.f``; ``mod`` for
    module level), each with its lines."""
    tree = ast.parse(source)
    out: dict[str, list[int]] = {}

    def spaced(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return any(c.isspace() for c in node.value)
        if isinstance(node, ast.JoinedStr):
            return any(spaced(v) for v in node.values)
        return False

    def builds(node: ast.AST) -> bool:
        if isinstance(node, ast.JoinedStr):
            return spaced(node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
            return spaced(node.left) or (isinstance(node.op, ast.Add) and spaced(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return node.func.attr in ("format", "join") and spaced(node.func.value)
        return False

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, f"{where}.{child.name}" if where != mod else f"{mod}.{child.name}")
                continue
            line = getattr(child, "lineno", 0)
            if builds(child) and line not in out.get(where, []):
                out.setdefault(where, []).append(line)
                if isinstance(child, ast.JoinedStr):
                    continue  # its parts are one piece of text
            visit(child, where)

    visit(tree, mod)
    return out


def prose_violations(found: Mapping[str, list[int]], not_yet: Mapping[str, str]) -> list[str]:
    """Prose built outside ``not_yet`` (by function, or by a whole module), and entries of
    ``not_yet`` that build none any more."""
    out = []
    for where, lines in sorted(found.items()):
        if not any(where == k or where.startswith(k + ".") for k in not_yet):
            out.append(f"{where}:{lines[0]}: user text formatted in the decision layer")
    for key in sorted(not_yet):
        if not any(w == key or w.startswith(key + ".") for w in found):
            out.append(f"{key}: formats no text any more: take it off NOT_YET")
    return out


def violations(
    graph: Mapping[str, Iterable[str]],
    lines: Mapping[str, int],
    layers: Mapping[str, int] = LAYERS,
    allowed_cycles: Iterable[frozenset[str]] = (),
    docs: Mapping[str, str] | None = None,
) -> list[str]:
    """Every breach of the contract, one line each (empty: the house stands). Without `docs`
    every module is taken to name its concept (the checker's own tests of other rules)."""
    allowed = set(allowed_cycles)
    out: list[str] = []
    for mod in sorted(graph):
        if layer_of(mod, layers) is None:
            out.append(f"{mod}: in no layer (add its folder to LAYERS)")
    for mod, deps in sorted(graph.items()):
        here = layer_of(mod, layers)
        for dep in sorted(deps):
            there = layer_of(dep, layers)
            if here is not None and there is not None and there > here:
                out.append(f"{mod} (layer {here}) imports {dep} (layer {there}): upward")
    for comp in cycles(graph) + cycles(package_graph(graph)):
        if comp not in allowed:
            out.append("cycle: " + " <-> ".join(sorted(comp)))
    for mod, n in sorted(lines.items()):
        doc = ONE_CONCEPT if docs is None else docs.get(mod, "")
        if not doc.strip():
            out.append(f"{mod}: names no concept (a docstring whose first line says what it holds)")
        elif n > LONG_MODULE and ONE_CONCEPT not in doc:
            out.append(
                f"{mod}: {n} lines (over {LONG_MODULE}: say in its docstring, after"
                f" '{ONE_CONCEPT}', why it is one concept, or split it)"
            )
    return out


# --- the package -------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_package_keeps_the_contract() -> None:
    graph, lines, docs = import_graph_with_docs()
    assert violations(graph, lines, docs=docs) == []


@pytest.mark.slow
def test_the_decision_layer_is_pure() -> None:
    graph, _ = import_graph()
    assert impure_edges(graph) == []
    found: list[str] = []
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        mod = module_name(path, ROOT)
        if _within(mod, PURE):
            found += impure_calls(path.read_text(encoding="utf-8"), mod)
    assert found == []


@pytest.mark.slow
def test_only_flows_call_the_solver() -> None:
    found: list[str] = []
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        found += solver_calls(path.read_text(encoding="utf-8"), module_name(path, ROOT))
    assert found == []


@pytest.mark.slow
def test_no_vocabulary_is_spelled_outside_its_enum() -> None:
    found: list[str] = []
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        found += vocabulary_literals(path.read_text(encoding="utf-8"), module_name(path, ROOT))
    assert found == []


def test_checker_finds_a_vocabulary_spelled_outside_its_enum() -> None:
    planted = (
        "import click\n"
        "CHOICE = click.Choice(['compat', 'strict'])\n"
        "def f(request, options, grade):\n"
        "    if request.policy == 'strict':\n"
        "        return options.conda_source != 'conda-forge'\n"
        "    return grade in ('observed', 'official')\n"
    )
    assert sorted(vocabulary_literals(planted, "resolver.commands.x")) == [
        "resolver.commands.x:2: spells DriverPolicy's words (use the enum)",
        "resolver.commands.x:4: compares with DriverPolicy's word (use the enum)",
        "resolver.commands.x:5: compares with CondaSource's word (use the enum)",
        "resolver.commands.x:6: spells Grade's words (use the enum)",
    ]
    assert vocabulary_literals(planted, "resolver.core.vocab") == []
    clean = "def f(stream, t):\n    return stream.errors == 'strict' or t.platform == 'any'\n"
    assert vocabulary_literals(clean, "resolver.cli") == []


def test_checker_finds_a_solver_call_outside_the_flows() -> None:
    planted = (
        "from resolver.solve import Decision, solve\n"
        "from resolver.solve import whatif\n"
        "import resolver.solve.memo as memo\n"
        "def f(c, t, r, d):\n"
        "    whatif.unlocks(d, {})\n"
        "    memo.FleetSolver(c, r)\n"
        "    return solve(c, t, r)\n"
    )
    assert solver_calls(planted, "resolver.writers.formats.report") == [
        "resolver.writers.formats.report: imports solve from resolver.solve (only flows solve)",
        "resolver.writers.formats.report: calls unlocks (only flows solve)",
        "resolver.writers.formats.report: calls FleetSolver (only flows solve)",
    ]
    assert solver_calls(planted, "resolver.flows.lock") == []
    clean = "from resolver.solve import Decision\nfrom resolver.solve.whatif import sentence\n"
    assert solver_calls(clean, "resolver.writers.formats.report") == []


def test_the_decision_layer_writes_no_sentence() -> None:
    found: dict[str, list[int]] = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        mod = module_name(path, ROOT)
        if _within(mod, PROSE_FREE):
            found.update(prose(path.read_text(encoding="utf-8"), mod))
    assert prose_violations(found, NOT_YET) == []


def test_checker_finds_prose_and_lets_labels_pass() -> None:
    source = (
        "def label(v: str, b: str) -> str:\n"
        "    return f'{v}+{b}' + '-'.join([v, b]) + 'R%d' % 3\n"
        "def reason(v: str) -> str:\n"
        "    return f'torch {v} does not match'\n"
        "class C:\n"
        "    def why(self, xs: list[str]) -> str:\n"
        "        return '; '.join(xs) + ' (it has ' + 'none)'\n"
        "def old(x: str) -> str:\n"
        "    return 'a {}'.format(x) + 'b %s' % x\n"
    )
    found = prose(source, "resolver.solve.x")
    assert found == {
        "resolver.solve.x.reason": [4],
        "resolver.solve.x.C.why": [7],
        "resolver.solve.x.old": [9],
    }
    assert prose_violations(found, {"resolver.solve.x.old": "", "resolver.solve.y": ""}) == [
        "resolver.solve.x.C.why:7: user text formatted in the decision layer",
        "resolver.solve.x.reason:4: user text formatted in the decision layer",
        "resolver.solve.y: formats no text any more: take it off NOT_YET",
    ]


# Values are typed once, where text enters (the database loader, an option, a file read back):
# the layers below compare Driver, CudaVersion, CC and PythonVersion values, never re-read a
# version's text. A parse there is a call of a parser of the driver/CUDA/CC/Python grammars or a
# regex over digits; each one left is listed by function (``mod.f``; ``mod`` alone: module level,
# that only), with why. An entry that parses nothing any more fails too: the lists only shrink.
TYPED_ONCE = ("resolver.solve", "resolver.images", "resolver.writers", "resolver.present")
VERSION_PARSERS = frozenset({"driver_key", "cuda_key", "parse_cc", "plain_python", "release_key"})
VERSION_TYPES = frozenset({"Driver", "CudaVersion", "PythonVersion"})
REGEX_CALLS = frozenset({"compile", "match", "fullmatch", "search", "sub", "split", "findall"})
TEXT_ENTERS: dict[str, str] = {
    # The user's words, parsed where they arrive.
    "resolver.solve.inputs": "the --variant and requirement grammars of a request",
    "resolver.solve.inputs.build_request": "a request's --cuda/--python/--driver options",
    "resolver.images.reference.parse": "an image reference's tag",
    "resolver.images.evaluate": "the official and NGC tag grammars (the image named)",
    "resolver.present.explain": "`explain`'s build argument (torch==X+cuNNN)",
    # Files read back or read first here.
    "resolver.images.facts.from_raw": "images.yaml's NGC releases: their CUDA and Python, read",
    "resolver.images.facts._forward_compat": "images.yaml's CUDA majors and branches, read",
    "resolver.writers.recorded.target_from_record": "a lock's recorded target read back",
    # Not a version: digits in names.
    "resolver.solve.shapes._natural": "node names in natural order (gpu-2 before gpu-10)",
}
NOT_TYPED_YET: dict[str, str] = {
    # Records still held as text (issue 37): each goes when its record is typed in the loader.
    "resolver.solve.target.target_from_profile": "HostProfile's driver, Python and CCs",
}


def version_parsing(source: str, mod: str) -> dict[str, list[int]]:
    """Where ``source`` parses a driver, CUDA, CC or Python version, by function, with lines."""
    out: dict[str, list[int]] = {}

    def parses(node: ast.AST) -> bool:
        """A parser named (called, or handed on: ``key=cuda_key``), or a regex over digits."""
        if isinstance(node, ast.Name):
            return node.id in VERSION_PARSERS
        if isinstance(node, ast.Attribute):
            base = node.value.id if isinstance(node.value, ast.Name) else None
            return node.attr in VERSION_PARSERS or (node.attr == "parse" and base in VERSION_TYPES)
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            return False
        func, pattern = node.func, node.args[0] if node.args else None
        return (
            isinstance(func.value, ast.Name)
            and func.value.id == "re"
            and func.attr in REGEX_CALLS
            and isinstance(pattern, ast.Constant)
            and isinstance(pattern.value, str)
            and ("[0-9]" in pattern.value or "\\d" in pattern.value)
        )

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, f"{where}.{child.name}")
                continue
            if parses(child):
                out.setdefault(where, []).append(getattr(child, "lineno", 0))
            visit(child, where)

    visit(ast.parse(source), mod)
    return out


def parsing_violations(found: Mapping[str, list[int]], allowed: Mapping[str, str]) -> list[str]:
    """Parses outside ``allowed`` (exactly that function, or module level), and stale entries."""
    out = [
        f"{where}:{lines[0]}: parses a version's text (type it where the text enters)"
        for where, lines in sorted(found.items())
        if where not in allowed
    ]
    out += [
        f"{key}: parses no version any more: take it off"
        for key in sorted(allowed)
        if key not in found
    ]
    return out


def test_versions_are_typed_once_where_text_enters() -> None:
    found: dict[str, list[int]] = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        mod = module_name(path, ROOT)
        if _within(mod, TYPED_ONCE):
            found.update(version_parsing(path.read_text(encoding="utf-8"), mod))
    assert parsing_violations(found, {**TEXT_ENTERS, **NOT_TYPED_YET}) == []


def test_checker_finds_version_parsing_and_lets_names_pass() -> None:
    source = (
        "import re\n"
        "from resolver.core import versions as v\n"
        "_TAG = re.compile(r'cu([0-9]+)')\n"
        "def floor(text: str) -> bool:\n"
        "    return driver_key(text) < v.cuda_key('12.8')\n"
        "class C:\n"
        "    def typed(self, t: str) -> object:\n"
        "        a = (Driver.parse(t), PythonVersion.parse(t))\n"
        "        return (a, parse_cc(t), re.match(r'\\d+', t))\n"
        "def handed(xs: list[str]) -> object:\n"
        "    return sorted(xs, key=cuda_key)\n"
        "def fine(name: str, d: Driver) -> object:\n"
        "    return (re.sub(r'[-_.]+', '-', name), d.key, parse(name), name.split('.'))\n"
    )
    found = version_parsing(source, "resolver.solve.x")
    assert found == {
        "resolver.solve.x": [3],
        "resolver.solve.x.floor": [5, 5],
        "resolver.solve.x.C.typed": [8, 8, 9, 9],
        "resolver.solve.x.handed": [11],
    }
    allowed = {"resolver.solve.x": "a tag", "resolver.solve.x.gone": "typed since"}
    assert parsing_violations(found, allowed) == [
        "resolver.solve.x.C.typed:8: parses a version's text (type it where the text enters)",
        "resolver.solve.x.floor:5: parses a version's text (type it where the text enters)",
        "resolver.solve.x.handed:11: parses a version's text (type it where the text enters)",
        "resolver.solve.x.gone: parses no version any more: take it off",
    ]


def test_every_standalone_script_has_its_own_python_target() -> None:
    import tomlkit  # a runtime dependency; tomllib is Python 3.11+

    config: Any = tomlkit.parse((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    targets = config["tool"]["ruff"]["per-file-target-version"]
    files = {f"{m.replace('.', '/')}.py" for m in STANDALONE}
    assert files <= set(targets), sorted(files - set(targets))
    on_disk = {
        f"resolver/standalone/{p.name}"
        for p in (ROOT / "resolver" / "standalone").glob("*.py")
        if p.name != "__init__.py"
    }
    assert on_disk == files  # every script there is marked standalone here


def test_every_package_face_says_what_it_offers() -> None:
    """Each package's ``__init__`` declares ``__all__`` (empty for a namespace of modules)."""
    missing = []
    for init in sorted((ROOT / PACKAGE).rglob("__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        targets = [
            t.id
            for node in tree.body
            if isinstance(node, (ast.Assign, ast.AnnAssign))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Name)
        ]
        if "__all__" not in targets:
            missing.append(module_name(init, ROOT))
    assert missing == []


@pytest.mark.slow
def test_the_standalone_scripts_import_nothing_of_gpuresolve() -> None:
    graph, _ = import_graph()
    for mod in STANDALONE:
        assert graph[mod] == set(), mod
        text = (ROOT / (mod.replace(".", "/") + ".py")).read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{mod}: a relative import"
                names = [node.module or ""]
            assert not [n for n in names if n == PACKAGE or n.startswith(PACKAGE + ".")], mod


# --- the checker itself, on synthetic graphs ---------------------------------------------------


def _layers() -> dict[str, int]:
    return {"resolver.core": CORE, "resolver.db": DATA, "resolver.solve": DECISION}


def test_checker_accepts_a_clean_graph() -> None:
    graph = {
        "resolver.core.errors": set(),
        "resolver.db.models": {"resolver.core.errors"},
        "resolver.solve.solver": {"resolver.db.models", "resolver.core.errors"},
    }
    assert violations(graph, dict.fromkeys(graph, 10), _layers()) == []


def test_checker_finds_an_upward_import() -> None:
    graph = {"resolver.db.models": {"resolver.solve.solver"}, "resolver.solve.solver": set()}
    found = violations(graph, {}, _layers())
    assert found == ["resolver.db.models (layer 2) imports resolver.solve.solver (layer 3): upward"]


def test_checker_finds_a_module_cycle_and_its_package_cycle() -> None:
    graph = {
        "resolver.solve.solver": {"resolver.solve.hints"},
        "resolver.solve.hints": {"resolver.solve.solver"},
        "resolver.db.a": {"resolver.core.b"},
        "resolver.core.b": set(),
    }
    assert violations(graph, {}, _layers()) == [
        "cycle: resolver.solve.hints <-> resolver.solve.solver"
    ]
    # across packages of one layer, a cycle is also a package cycle
    same = {"resolver.db": DATA, "resolver.host": DATA}
    graph = {"resolver.db.x": {"resolver.host.y"}, "resolver.host.y": {"resolver.db.z"}}
    graph["resolver.db.z"] = set()
    assert violations(graph, {}, same) == ["cycle: resolver.db <-> resolver.host"]


def test_checker_finds_probes_and_file_access_in_the_decision_layer() -> None:
    graph = {
        "resolver.solve.inputs": {"resolver.host.detection", "resolver.core.errors"},
        "resolver.images.facts": {"resolver.io.subprocs"},
        "resolver.writers.lockfiles": {"resolver.io.http"},  # effects may
    }
    assert impure_edges(graph) == [
        "resolver.images.facts imports resolver.io.subprocs: the decision layer never probes,"
        " runs or fetches",
        "resolver.solve.inputs imports resolver.host.detection: the decision layer never probes,"
        " runs or fetches",
    ]
    source = (
        "import os\nimport subprocess\nfrom pathlib import Path\n"
        "def f(p: Path) -> str:\n"
        "    text = open(p).read() + p.read_text() + os.environ['X']\n"
        "    return text + str(sorted(p.glob('*.json')))\n"
        "def g(x: str) -> str:  # words alone are fine: open( in a string\n"
        "    return 'open(' + x.strip()\n"
    )
    found = impure_calls(source, "resolver.solve.x")
    assert sorted(line.split(": ", 1)[1] for line in found) == [
        "glob( in the decision layer",
        "import subprocess in the decision layer",
        "open( in the decision layer",
        "os.environ in the decision layer",
        "read_text( in the decision layer",
    ]


def test_checker_finds_an_unplaced_module_a_long_one_and_one_naming_nothing() -> None:
    graph: dict[str, set[str]] = {
        "resolver.newthing": set(),
        "resolver.db.models": set(),
        "resolver.db.parse": set(),
        "resolver.db.big": set(),
    }
    lines = {"resolver.db.models": LONG_MODULE + 1, "resolver.db.parse": 10}
    lines["resolver.db.big"] = LONG_MODULE + 1
    docs = {
        "resolver.db.models": "The database's records.",
        "resolver.db.parse": "",
        "resolver.db.big": f"The parser.\n\n{ONE_CONCEPT} every rule reads one record.",
    }
    found = violations(graph, lines, _layers(), docs=docs)
    assert found == [
        "resolver.newthing: in no layer (add its folder to LAYERS)",
        f"resolver.db.models: {LONG_MODULE + 1} lines (over {LONG_MODULE}: say in its docstring,"
        f" after '{ONE_CONCEPT}', why it is one concept, or split it)",
        "resolver.db.parse: names no concept (a docstring whose first line says what it holds)",
    ]


def test_lazy_and_type_checking_imports_count(tmp_path: Path) -> None:
    pkg = tmp_path / "resolver"
    (pkg / "db").mkdir(parents=True)
    (pkg / "solve").mkdir()
    for init in (pkg, pkg / "db", pkg / "solve"):
        (init / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "db" / "models.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from resolver.solve.solver import X\n",
        encoding="utf-8",
    )
    (pkg / "solve" / "solver.py").write_text(
        "def f():\n    from ..db import models\n    return models\n", encoding="utf-8"
    )
    graph, _ = import_graph(tmp_path)
    assert graph["resolver.db.models"] == {"resolver.solve.solver"}
    assert graph["resolver.solve.solver"] == {"resolver.db", "resolver.db.models"}
    found = violations(graph, {}, {"resolver": CORE, **_layers()})
    assert "cycle: resolver.db.models <-> resolver.solve.solver" in found
    assert any("upward" in line for line in found)


# --- one exit code per error concept -----------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (UserError("bad --gpu"), 2),
        (DataError("torch.yaml: bad"), 2),
        (FetchError("https://mirror.example/simple/torch/", "HTTP 503"), 2),
        (IndexFormatError("not an index page"), 2),
        (MetadataError("not a zip file"), 2),
        (GpuresolveError("a concept with no exit code of its own"), EXIT_INTERNAL),
    ],
)
def test_every_error_concept_has_its_exit_code(error: GpuresolveError, code: int) -> None:
    assert exit_code(error) == code


def test_an_unconverted_fetch_error_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FetchError that no call site converted reaches the CLI as bad input, not exit 70."""
    from resolver import cli
    from resolver.commands import detect

    def fail(*args: object, **kwargs: object) -> None:
        raise FetchError("https://mirror.example/x", "HTTP 404", 404)

    monkeypatch.setattr(detect.detect, "callback", fail)
    with pytest.raises(SystemExit) as exc:
        cli.main(["detect"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["gpuresolve: error: https://mirror.example/x: HTTP 404"]
