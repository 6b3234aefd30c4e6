"""The house rules, computed from the code (no distexp module is imported here):

- no import circle between distexp's modules, function-level (lazy) imports included, nor between
  its packages (distexp.cluster, distexp.config, ...: a module of one importing one of the other);
- TensorFlow/Keras at module level only on the train side (distexp/train/, and the model
  definitions in distexp/models/gru_seq2seq.py that only the train side imports);
- the processes that must not start TensorFlow (the job, the sweep, the report) reach no such
  module through their module-level imports, and never import distexp.train at all;
- the packages nest as the processes do (`NESTING`): an inner package never imports an outer one
  except through its named seam;
- the job and the sweep never end the process (`NO_EXIT`): they return outcomes or raise, and
  distexp.__main__ decides the exit;
- Ray's private names (`ray._private`, `ray._raylet`, hydra-ray-launcher's `_launcher_util`) only in
  distexp/cluster/ray_compat.py;
- one forward and backward pass (`ONE_TAPE`): a `GradientTape` only in
  distexp.train.step.forward_backward, which the step, the parity's gradient norm and the compute
  probe share;
- no function of distexp longer than 60 lines;
- docs/architecture.md's package table names every module.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

from helpers import ROOT

PKG = ROOT / "distexp"
TF = ("tensorflow", "keras", "tensorflow_datasets")
TRAIN_SIDE = ("distexp.train", "distexp.models.gru_seq2seq")
# Entry modules of the processes without TensorFlow.
NO_TF_ENTRIES = ("distexp.__main__", "distexp.job.lifecycle", "distexp.sweeps.callback",
                 "distexp.ui", "distexp.sweeps.publish", "distexp.config.help",
                 "distexp.sweeps.planning", "distexp.sweeps.slurm_launcher", "distexp.report.cli",
                 "distexp.tracking.offline", "distexp.parity")


def modules() -> Dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        if "conf" in p.relative_to(PKG).parts:
            continue
        name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
        out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = p
    return out


def imports(name: str, path: Path, mods: Dict[str, Path],
            lines: Optional[List[Tuple[int, str]]] = None) -> Tuple[Set[str], Set[str], bool]:
    """(distexp modules imported at module level, ... inside functions, TF at module level);
    `lines`, when given, gets (line, module) of every distexp import."""
    tree = ast.parse(path.read_text())
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    top, lazy, tf_top = set(), set(), False

    def resolve(n: str):
        while n and n not in mods:
            n = n.rpartition(".")[0]
        return n or None

    def visit(node, in_function: bool):
        nonlocal tf_top
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                      ast.Lambda))
            names = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = pkg
                for _ in range(max(child.level - 1, 0)):
                    base = base.rpartition(".")[0]
                src = (f"{base}.{child.module}" if child.module else base) if child.level \
                    else (child.module or "")
                names = [f"{src}.{a.name}" if f"{src}.{a.name}" in mods else src
                         for a in child.names]
            for n in names:
                if n.split(".")[0] in TF and not in_function:
                    tf_top = True
                t = resolve(n) if n.startswith("distexp") else None
                if t and t != name:
                    (lazy if in_function else top).add(t)
                    if lines is not None:
                        lines.append((child.lineno, t))
            visit(child, inner)

    visit(tree, False)
    return top, lazy, tf_top


def graph():
    mods = modules()
    info = {m: imports(m, p, mods) for m, p in mods.items()}
    return mods, info


def circles(edges: Dict[str, Set[str]]):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            strong(v)
    return out


def test_no_import_circles_lazy_imports_included():
    _, info = graph()
    edges = {m: top | lazy for m, (top, lazy, _) in info.items()}
    assert circles(edges) == []


def package(module: str) -> str:
    """distexp.cluster.kinds -> distexp.cluster; a top-level module (distexp.ui) is its own."""
    return ".".join(module.split(".")[:2])


# Arrows allowed to close a package circle while it is being taken apart: none (the last circle,
# cluster -> job -> sweeps -> cluster, went when Proc moved to distexp/cluster/). An arrow listed
# here that no longer exists fails the test below, so the list can only shrink.
KNOWN_ARROWS: set = set()


def package_edges(info, skip=frozenset()):
    edges: Dict[str, Set[str]] = {}
    for m, (top, lazy, _) in info.items():
        edges.setdefault(package(m), set())
        for t in top | lazy:
            if package(t) != package(m) and (m, t) not in skip:
                edges[package(m)].add(package(t))
                edges.setdefault(package(t), set())
    return edges


def test_no_import_circles_between_packages():
    _, info = graph()
    assert circles(package_edges(info, KNOWN_ARROWS)) == []
    # an arrow that is gone leaves the list, so it cannot hide a new circle
    stale = sorted(a for a in KNOWN_ARROWS if a[1] not in info[a[0]][0] | info[a[0]][1])
    assert stale == []


def test_a_planted_package_circle_is_found():
    """Modules without a circle between them can still tie their packages in one."""
    info = {"distexp.a.x": ({"distexp.b.y"}, set(), False), "distexp.b.y": (set(), set(), False),
            "distexp.b.z": (set(), {"distexp.a.w"}, False), "distexp.a.w": (set(), set(), False)}
    assert circles({m: top | lazy for m, (top, lazy, _) in info.items()}) == []
    assert circles(package_edges(info)) == [["distexp.a", "distexp.b"]]
    assert circles(package_edges(info, {("distexp.b.z", "distexp.a.w")})) == []


def test_a_planted_circle_is_found():
    """The detector itself: a lazy import back is a circle."""
    assert circles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    assert circles({"a": {"b"}, "b": set()}) == []


# The processes nest, outer to inner: a sweep (distexp.sweeps, in the command's process) runs jobs;
# a job (distexp.job) starts the training processes (distexp.train); each inner one is started by
# the outer and knows nothing of it. Entries (distexp.__main__, ui, parity) sit above them all, and
# the shared packages (config, cluster, strategies, options, tracking, figures, ...) below. So an
# inner package imports an outer one only through its seam: the trainer's progress records are
# the leaf distexp.progress_feed (no package of either side), the job asks its sweep only through
# distexp.sweeps.seat. The report (distexp.report) is a process of its own reading MLflow: it
# imports none of the three.
NESTING = ("distexp.sweeps", "distexp.job", "distexp.train")
SEAMS = {"distexp.job": {"distexp.sweeps.seat"}}
FORBIDDEN = {("distexp.report", p) for p in NESTING} | {("distexp.sweeps", "distexp.report")}
# The sweep process publishes the report of a finished sweep on its parent run (the table in the
# description, the plots): that is the report's code run by the sweep, through one door,
# distexp.sweeps.publish; no other sweeps module imports the report (the sweep's decision records,
# which both render, are the leaf distexp.figures.outcomes).
DOORS = {("distexp.sweeps", "distexp.report"): "distexp.sweeps.publish"}


def outward(module: str, target: str) -> bool:
    """Whether importing `target` from `module` breaks the nesting."""
    a, b = package(module), package(target)
    if (a, b) in FORBIDDEN:
        return module != DOORS.get((a, b))
    if a in NESTING and b in NESTING and NESTING.index(b) < NESTING.index(a):
        return target not in SEAMS.get(a, ())
    return False


def nesting_offenders(mods: Dict[str, Path], root: Path = ROOT) -> List[str]:
    """Every import that breaks the nesting, as "<file>:<line>: <module> imports <module>"."""
    out = []
    for m, p in sorted(mods.items()):
        lines: List[Tuple[int, str]] = []
        imports(m, p, mods, lines)
        out += [f"{p.relative_to(root)}:{n}: {m} imports {t}" for n, t in lines if outward(m, t)]
    return out


def test_packages_nest_as_the_processes_do():
    mods, _ = graph()
    assert nesting_offenders(mods) == []


def test_an_outward_import_is_found(tmp_path):
    """The check itself: the trainer importing the job, the job a sweep module other than the seat
    (lazily too), with file:line; the seat and an outer package importing an inner one pass."""
    job = tmp_path / "distexp" / "job"
    job.mkdir(parents=True)
    (job / "x.py").write_text("from distexp.sweeps import seat\n"
                              "def f():\n    from distexp.sweeps.records import SWEEP_FILE\n")
    train = tmp_path / "distexp" / "train"
    train.mkdir()
    (train / "y.py").write_text("import os\nfrom distexp.job import x\n")
    mods = {"distexp.job.x": job / "x.py", "distexp.train.y": train / "y.py",
            "distexp.sweeps.seat": job / "x.py", "distexp.sweeps.records": job / "x.py"}
    assert nesting_offenders(mods, tmp_path) == ["distexp/job/x.py:3: distexp.job.x imports distexp.sweeps.records",
                     "distexp/train/y.py:2: distexp.train.y imports distexp.job.x"]
    assert not outward("distexp.sweeps.callback", "distexp.job.lifecycle")


def test_no_distexp_state_read_through_sys_modules():
    """A module learns another's state from what it returns (a job's `Outcome` to __main__), never
    by looking the module up in sys.modules: `sys.modules.get("distexp...")` or `["distexp..."]`."""
    found = [f"{p.relative_to(ROOT)}:{n.lineno}" for p in sorted(PKG.rglob("*.py"))
             for n in ast.walk(ast.parse(p.read_text()))
             if isinstance(n, (ast.Call, ast.Subscript)) and "sys.modules" in ast.unparse(n)
             and re.search(r"""sys\.modules(\.get\(|\[)['"]distexp""", ast.unparse(n))]
    assert found == []


# The job and the sweep hand their outcome back; distexp.__main__ (and each program's own
# `if __name__ == "__main__":`) ends the process.
NO_EXIT = ("distexp/job", "distexp/sweeps", "distexp/errors.py")


def exits(root: Path = ROOT) -> List[str]:
    """`sys.exit(...)` (or a bare `exit(...)`) in `NO_EXIT`, a `__main__` block aside."""
    found = []
    for where in NO_EXIT:
        for path in sorted((root / where).rglob("*.py")) if (root / where).is_dir() else [root / where]:
            tree = ast.parse(path.read_text())
            mains = {id(n) for top in tree.body if isinstance(top, ast.If)
                     and "__name__" in ast.unparse(top.test) for n in ast.walk(top)}
            found += [f"{path.relative_to(root)}:{n.lineno}" for n in ast.walk(tree)
                      if isinstance(n, ast.Call) and ast.unparse(n.func) in ("sys.exit", "exit")
                      and id(n) not in mains]
    return found


def test_the_job_and_the_sweep_never_exit():
    assert exits() == []


def test_an_exit_in_the_job_is_found(tmp_path):
    for where in NO_EXIT:
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "distexp/job").mkdir()
    (tmp_path / "distexp/sweeps").mkdir()
    (tmp_path / "distexp/errors.py").write_text("import sys\nif __name__ == '__main__':\n    sys.exit(0)\n")
    (tmp_path / "distexp/job/x.py").write_text("import sys\n\n\ndef f():\n    sys.exit(130)\n")
    assert exits(tmp_path) == ["distexp/job/x.py:5"]


# Ray's internals are reached from one module, whose test names the name that moved in a new Ray.
RAY_PRIVATE = re.compile(r"\bray\._private\b|\bray\._raylet\b|hydra_ray_launcher\._launcher_util")
RAY_COMPAT = "distexp/cluster/ray_compat.py"


def ray_private_uses(root: Path = ROOT) -> List[str]:
    """Lines of distexp/ and hydra_plugins/ naming a private Ray module, outside `RAY_COMPAT`."""
    files = sorted((root / "distexp").rglob("*.py")) + sorted((root / "hydra_plugins").rglob("*.py"))
    return [f"{p.relative_to(root)}:{i}" for p in files if p.relative_to(root).as_posix() != RAY_COMPAT
            for i, line in enumerate(p.read_text().splitlines(), 1) if RAY_PRIVATE.search(line)]


def test_ray_private_names_only_in_ray_compat():
    assert ray_private_uses() == []


def test_a_private_ray_use_elsewhere_is_found(tmp_path):
    (tmp_path / "distexp/cluster").mkdir(parents=True)
    (tmp_path / "hydra_plugins").mkdir()
    (tmp_path / RAY_COMPAT).write_text("from ray._private import ray_constants\n")
    (tmp_path / "distexp/cluster/x.py").write_text("import ray\nfrom ray._raylet import GcsClient\n")
    (tmp_path / "hydra_plugins/y.py").write_text(
        "\nfrom hydra_plugins.hydra_ray_launcher._launcher_util import _run_job\n")
    assert ray_private_uses(tmp_path) == ["distexp/cluster/x.py:2", "hydra_plugins/y.py:2"]



# The training step's forward and backward pass is written once (the step, gradient_norm and the
# compute probe build it): the one GradientTape of distexp, as "<file> <function>".
ONE_TAPE = ["distexp/train/step.py forward_backward"]


def _names_tape(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return any(a.name == "GradientTape" for a in node.names)
    return getattr(node, "attr", None) == "GradientTape" or getattr(node, "id", None) == "GradientTape"


def tapes(root: Path = ROOT) -> List[str]:
    """Every use of `GradientTape` in distexp/ (tf.GradientTape, or the name imported), as
    "<file> <enclosing function>" (<module> at top level), by file and line."""
    found = []
    for path in sorted((root / "distexp").rglob("*.py")):
        tree = ast.parse(path.read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in sorted((n for n in ast.walk(tree) if _names_tape(n)), key=lambda n: n.lineno):
            scope = node
            while scope in parents and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                scope = parents[scope]
            found.append(f"{path.relative_to(root).as_posix()} {getattr(scope, 'name', '<module>')}")
    return found


def test_one_gradient_tape_the_steps_forward_and_backward():
    assert tapes() == ONE_TAPE


def test_a_second_gradient_tape_is_found(tmp_path):
    (tmp_path / "distexp/train/loops").mkdir(parents=True)
    (tmp_path / "distexp/train/step.py").write_text(
        "def forward_backward():\n    import tensorflow as tf\n\n"
        "    def inner(x):\n        with tf.GradientTape() as tape:\n            pass\n")
    (tmp_path / "distexp/train/loops/x.py").write_text(
        "from tensorflow import GradientTape\n\n\nclass A:\n    def norm(self):\n"
        "        return GradientTape()\n")
    assert tapes(tmp_path) == ["distexp/train/loops/x.py <module>", "distexp/train/loops/x.py norm",
                               "distexp/train/step.py inner"]


def test_tensorflow_at_module_level_only_on_the_train_side():
    _, info = graph()
    outside = [m for m, (_, _, tf_top) in info.items()
               if tf_top and not m.startswith(TRAIN_SIDE)]
    assert outside == []


def test_processes_without_tensorflow_never_reach_the_train_side():
    mods, info = graph()
    for entry in NO_TF_ENTRIES:
        assert entry in mods, entry
        seen, todo = set(), [entry]
        while todo:  # module-level imports: what importing the entry runs
            m = todo.pop()
            if m in seen:
                continue
            seen.add(m)
            todo += info[m][0]
            # a package's __init__ runs when any of its modules is imported
            parent = m.rpartition(".")[0]
            if parent in mods:
                todo.append(parent)
        bad = sorted(m for m in seen if m.startswith(TRAIN_SIDE) or info[m][2])
        assert bad == [], f"{entry} imports {bad} at module level"
        lazy_train = sorted(t for m in seen for t in info[m][1] if t.startswith("distexp.train"))
        assert lazy_train == [], f"{entry} reaches the train side lazily: {lazy_train}"


def test_test_files_share_helpers_through_helpers_only():
    """A test file never imports another test file: what tests share lives in
    tests/helpers/ (servers.py, user_code/, probes/ included), so a tier can run any file alone."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("test_")]
    assert not offenders, offenders


def test_no_helper_defined_in_two_test_files():
    """What test files share lives in tests/helpers/: a module-level helper of one name
    in two test files is a copy, or two meanings under one name. A fixture is a file's own by
    pytest's design (`toy` plugs a strategy in one file, a cluster kind in another), but the same
    fixture body twice is a copy."""
    names: dict = {}
    bodies: dict = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("test_"):
                continue
            if any("fixture" in ast.unparse(d) for d in node.decorator_list):
                body = ast.dump(ast.Module(body=node.body, type_ignores=[]))
                bodies.setdefault(body, []).append(f"{path.name}:{node.name}")
            else:
                names.setdefault(node.name, []).append(path.name)
    assert {name: files for name, files in names.items() if len(files) > 1} == {}
    assert [where for where in bodies.values() if len(where) > 1] == []



# Packages the table names as a whole: each module is one record of the package's kind (a
# strategy, a task, a model, a dataset), so a new record needs no new row.
RECORD_PACKAGES = ("strategies", "tasks", "models", "data")


def test_package_table_names_every_package_and_module():
    """docs/architecture.md's package table names every top-level module and package of
    distexp/, and, in a package's row, each of its modules and sub-packages (`name` or `name/`),
    except in the packages of records."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index("| package | process |"):].split("\n\n")[0]
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    firsts = " ".join(r[0] for r in rows)
    pkg = ROOT / "distexp"
    missing = [f"{m.name}" for m in pkg.glob("*.py")
               if m.name != "__init__.py" and f"{m.name}`" not in firsts]
    for sub in sorted(p for p in pkg.iterdir() if (p / "__init__.py").exists() and p.name != "conf"):
        row = [r for r in rows if f"{sub.name}/`" in r[0]]
        if not row:
            missing.append(f"{sub.name}/")
            continue
        if sub.name in RECORD_PACKAGES:
            continue
        said = set(re.findall(r"`([\w/]+)`", row[0][-1]))
        names = [m.stem for m in sub.glob("*.py") if m.stem != "__init__"]
        names += [f"{d.name}/" for d in sub.iterdir() if (d / "__init__.py").exists()]
        missing += [f"{sub.name}/{n}" for n in names if n not in said]
    assert not missing, f"docs/architecture.md's package table does not name: {missing}"


MAX_FUNCTION_LINES = 60


def long_functions(path: Path, root: Path = ROOT, limit: int = MAX_FUNCTION_LINES):
    """The functions of a file (methods and nested ones included) longer than `limit` lines, def
    line to last line, as "<file relative to root>:<line> <name> (<n> lines)"."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = node.end_lineno - node.lineno + 1
            if n > limit:
                out.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_function_longer_than_60_lines():
    """A function of distexp over 60 lines is split into named steps."""
    offenders = [f for p in sorted(PKG.rglob("*.py")) for f in long_functions(p)]
    assert not offenders, offenders


def test_a_long_function_is_found(tmp_path):
    """The check itself: 61 lines are reported (a nested function and its parent too), 60 not."""
    def body(lines, indent):
        return "".join(f"{indent}x{i} = {i}\n" for i in range(lines))

    path = tmp_path / "probe.py"
    path.write_text("def sixty():\n" + body(59, "    ") +          # lines 1-60
                    "async def sixty_one():\n" + body(60, "    ") +  # lines 61-121
                    "def outer():\n"                                # lines 122-184
                    "    def inner():\n" + body(60, "        ") +    # lines 123-183
                    "    return inner\n")
    assert sorted(long_functions(path, root=tmp_path)) == [
        "probe.py:122 outer (63 lines)", "probe.py:123 inner (61 lines)",
        "probe.py:61 sixty_one (61 lines)"]


def test_test_files_mirror_the_code():
    """A test file lives in tests/<home>/: <home> a distexp package or top-level module, or cli,
    e2e, project, benchmarks (docs/testing.md, "Where a test lives"); none at tests/'s top (a file
    from an older branch: move it there). Its name is unique: pytest imports it by its basename."""
    tests = ROOT / "tests"
    homes = {p.name.removesuffix(".py") for p in PKG.iterdir()
             if (p / "__init__.py").exists() or p.suffix == ".py"} | {"cli", "e2e", "project", "benchmarks"}
    files = sorted(tests.rglob("test_*.py"))
    wrong = [p.relative_to(tests).as_posix() for p in files
             if len(p.relative_to(tests).parts) != 2 or p.parent.name not in homes]
    assert wrong == [], f"test files outside tests/<home>/: {wrong}"
    names = [p.name for p in files]
    assert sorted({n for n in names if names.count(n) > 1}) == []
