"""The floors of docs/extend/architecture.md, checked on every module's imports (those inside functions too):
no import from a lower floor to a higher one, no import circle, no private name used across modules."""

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"edgesim": "edgesim", "learning": "edgesim.learning", "scenarios": "edgesim.scenarios", "plots": "edgesim.plots"}

# docs/extend/architecture.md, "The floors": each floor and the floors it may import (itself included).
FLOORS = {
    "edgesim.results": {"edgesim.results", "edgesim.config"},
    "edgesim": {"edgesim", "edgesim.results"},
    "edgesim.learning": {"edgesim", "edgesim.results", "edgesim.learning"},
    "edgesim.plots": {"edgesim", "edgesim.results", "edgesim.plots"},
    "edgesim.scenarios": {"edgesim", "edgesim.results", "edgesim.learning", "edgesim.plots", "edgesim.scenarios"},
}
FACE = "edgesim"  # edgesim/__init__.py: hands the API's names on lazily (PEP 562); it is the top, not the ground


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in FOLDERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


MODULES = _modules()


def _project_module(name: str):
    """The project module ``name`` is, or is inside of (``pkg.mod.attr`` → ``pkg.mod``); ``None`` if none."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path) -> list[tuple[int, str, ast.AST]]:
    """(line, imported project module, node) of every import statement of ``module``, at any depth."""
    base = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, m, node) for a in node.names if (m := _project_module(a.name))]
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                b = base
                for _ in range(node.level - 1):
                    b = b.rpartition(".")[0]
                source = f"{b}.{source}" if source else b
            for a in node.names:
                m = f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else _project_module(source)
                if m:
                    out.append((node.lineno, m, node))
    return [(line, m, node) for line, m, node in out if m != module]


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def floor(module: str) -> str:
    for f in sorted(FLOORS, key=len, reverse=True):
        if module == f or module.startswith(f + "."):
            return f
    raise AssertionError(f"{module} is on no floor of docs/extend/architecture.md")


def test_no_import_goes_up_a_floor():
    wrong = []
    for module, imports in GRAPH.items():
        if module == FACE:
            continue
        for line, target, _ in imports:
            allowed = FLOORS[floor(module)]
            if floor(target) not in allowed and not (target == "edgesim.config" and "edgesim.config" in allowed):
                wrong.append(f"{MODULES[module].relative_to(REPO)}:{line}: {module} ({floor(module)}) imports "
                             f"{target} ({floor(target)})")
    assert not wrong, "\n".join(wrong)


def test_the_floors_are_the_documented_ones():
    text = (REPO / "docs" / "extend" / "architecture.md").read_text(encoding="utf-8")
    for f in FLOORS:
        assert f"`{f}`" in text, f


def test_no_import_circle():
    index, low, stack, on_stack, circles, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for _, w, _ in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert not circles, circles


def test_no_private_name_crosses_modules():
    wrong = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases, seen = set(), set()
        for line, target, node in GRAPH[module]:
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        wrong.append(f"{path.relative_to(REPO)}:{line}: imports {a.name} from {target}")
                    if f"{node.module}.{a.name}" in MODULES or target.endswith("." + a.name):
                        aliases.add(a.asname or a.name)
            else:
                aliases.update(a.asname for a in node.names if a.asname)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases \
                    and re.fullmatch(r"_[a-z]\w*", node.attr):
                wrong.append(f"{path.relative_to(REPO)}:{node.lineno}: uses {node.value.id}.{node.attr}")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_the_walk_sees_the_imports_it_checks():
    """The checks above can fail: the walk finds imports inside functions and across floors."""
    run = {t for _, t, _ in GRAPH["edgesim.scenarios.run"]}
    assert "edgesim.scenarios.algorithm_run" in run and "edgesim.results.writing" in run
    assert floor("edgesim.results.reading") == "edgesim.results" and floor("edgesim.engine") == "edgesim"
    assert "edgesim.scenarios.api" in {t for _, t, _ in GRAPH[FACE]}


NOQA = re.compile(r"#\s*noqa\b(?P<rest>.*)$")
NOQA_WITH_REASON = re.compile(r"^: [A-Z]+[0-9]+(, [A-Z]+[0-9]+)* - \S.*$")  # "# noqa: E402 - why"


def test_every_noqa_names_its_rules_and_says_why():
    """A ``# noqa`` silences named rules and says why after them (``# noqa: E402 - after importorskip``); a bare
    ``# noqa``, or one without a reason, is refused: fix the code instead where it can be fixed."""
    import subprocess
    import tokenize

    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True).stdout.split()
    assert tracked, "git ls-files found no Python files"
    bad = []
    for name in tracked:
        path = REPO / name
        if not path.is_file():
            continue
        with path.open("rb") as f:
            comments = [t for t in tokenize.tokenize(f.readline) if t.type == tokenize.COMMENT]
        for token in comments:
            m = NOQA.search(token.string)
            if m and not NOQA_WITH_REASON.match(m.group("rest")):
                bad.append(f"{name}:{token.start[0]}: {token.line.strip()}")
    assert not bad, "a # noqa without its rules and a reason ('# noqa: E402 - why'):\n" + "\n".join(bad)
    assert NOQA_WITH_REASON.match(": F401, E402 - re-exported") and not NOQA_WITH_REASON.match(": E731")


ENGINES = ("edgesim.engine", "edgesim.asynchrony")


def _reaches(start: str) -> set[str]:
    """Every project module ``start`` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for _, target, _ in GRAPH[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_two_engines_are_siblings():
    """The synchronous and the asynchronous engine share one clock core (edgesim.clock, edgesim.device_job,
    edgesim.records) and neither imports the other, directly or through another module."""
    for engine in ENGINES:
        other = next(e for e in ENGINES if e != engine)
        reached = _reaches(engine)
        assert other not in reached, f"{engine} imports {other}"
        assert {"edgesim.clock", "edgesim.device_job", "edgesim.records"} <= reached, engine


def test_the_sibling_check_can_fail():
    assert "edgesim.links" in _reaches("edgesim.device_job") and "edgesim.engine" in _reaches("edgesim.planning")


def _string_constants(module: str) -> set[str]:
    """The string literals of ``module``'s code (docstrings left out)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs}


def test_the_engines_spell_no_rule_or_policy_name():
    """The engines ask the registries (edgesim.async_rules, edgesim.resources) what a rule or a policy does; no
    name of one is tested as a string in them."""
    from edgesim.async_rules import ASYNC_RULES
    from edgesim.resources import KINDS, POLICIES

    names = set(ASYNC_RULES) | {name for kind in KINDS for name in POLICIES[kind]}
    for engine in (*ENGINES, "edgesim.device_job", "edgesim.clock"):
        spelled = _string_constants(engine) & names
        assert not spelled, f"{engine} spells {sorted(spelled)}"
    assert "fedbuff" in _string_constants("edgesim.async_rules")  # the check can fail: the registry spells it
def _name_literals(module: str, names: set[str]) -> list[str]:
    """``path:line: 'name'`` of every string literal of ``module`` that is one of ``names``."""
    path = MODULES[module]
    return [f"{path.relative_to(REPO)}:{n.lineno}: {n.value!r}" for n in ast.walk(ast.parse(path.read_text("utf-8")))
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names]


def test_the_algorithm_registry_is_a_module_of_its_own():
    """``edgesim.learning.config`` validates algorithm names against ``edgesim.learning.registry`` and imports no
    algorithm (the registry fills itself by name); the algorithms package re-exports the registry's API."""
    config = {t for _, t, _ in GRAPH["edgesim.learning.config"]}
    assert "edgesim.learning.registry" in config
    assert not [t for t in config if t.startswith("edgesim.learning.algorithms")], sorted(config)
    assert "edgesim.learning.registry" in {t for _, t, _ in GRAPH["edgesim.learning.algorithms"]}


def test_capabilities_are_declared_not_listed_by_name():
    """No rule of the simulator or the scenario's validation and runs names an algorithm: which algorithms choose
    their own devices, decide their budget or run asynchronously is each algorithm's declaration."""
    from edgesim.learning.registry import declared

    names = set(declared())
    rules = [m for m in MODULES if floor(m) in ("edgesim", "edgesim.results")] + [
        "edgesim.scenarios.schema", "edgesim.scenarios.algorithm_run", "edgesim.scenarios.run"]
    found = [hit for m in rules for hit in _name_literals(m, names)]
    assert not found, "\n".join(found)
    assert _name_literals("edgesim.learning.config", names)  # the check can fail: DEFAULT_ALGORITHMS names some


def test_no_module_outside_the_codec_registries_spells_a_codec_name():
    """A codec's name is spelled where it is registered (its torch-free class, its encoding) and nowhere else."""
    from edgesim.codecs import CODECS

    names = set(CODECS) - {"none"}  # "none" is also every default's word
    homes = {"edgesim.codecs", "edgesim.learning.compression"}
    found = [hit for m in MODULES if m not in homes for hit in _name_literals(m, names)]
    assert not found, "\n".join(found)
    assert _name_literals("edgesim.codecs", names)
