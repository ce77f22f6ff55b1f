"""The layout of bench/ (bench/README.md): what may import what, the studies' READMEs, and the
result files the docs cite.

- ``bench/lib/`` is the only importable part of bench/: no module anywhere imports a study
  (``bench/studies/<date>-<topic>/*.py``), and no bench script imports another script;
- every study folder holds its README.md (the question, the result, the decision) and a script;
- every result file README.md, bench/README.md and docs/*.md cite exists, and none is cited by
  the old short form ``results/NAME`` (a result lives beside its purpose now).

Pure file reading: no database, no model.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import expand_braces

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
STUDIES = BENCH / "studies"
DOCS = [ROOT / "README.md", BENCH / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Python files that could import bench code: the project's own.
SOURCES = sorted(
    p
    for top in ("bench", "tests", "pglogic", "migrations")
    for p in (ROOT / top).rglob("*.py")
    if "__pycache__" not in p.parts
)
#: Calls that load a module by name or path (and ``sys.path.insert`` / ``append``).
LOADERS = {"import_module", "run_path", "run_module", "spec_from_file_location"}
CITED = re.compile(r"(?<![\w/.])bench/[A-Za-z0-9_./*{},<>-]*[A-Za-z0-9_*}>]")
SHORT = re.compile(r"(?<![\w/.])results/[A-Za-z0-9_]")
DATED = re.compile(r"\d{4}-\d{2}-\d{2}-[a-z0-9]+(-[a-z0-9]+)*")


def rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


def in_studies(p: Path) -> bool:
    return STUDIES in p.parents


def stems(paths: list[Path]) -> dict[str, Path]:
    return {p.stem: p for p in paths}


@cache
def source(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(source(path), filename=str(path))


@cache
def imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import of ``path``, at any depth."""
    out = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def loads_a_study(path: Path) -> list[int]:
    """Lines where importlib / runpy / sys.path is handed a path or name inside studies/."""
    if "studies" not in source(path):
        return []
    lines = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            text = " ".join(
                str(c.value)
                for a in node.args
                for c in ast.walk(a)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            )
            on_path = isinstance(func, ast.Attribute) and ast.unparse(func.value) == "sys.path"
            if (name in LOADERS or on_path) and "studies" in text:
                lines.append(node.lineno)
    return lines


def test_bench_is_laid_out_by_purpose() -> None:
    for folder in ("lib", "perf", "quality", "correctness", "studies"):
        assert (BENCH / folder).is_dir(), folder
    loose = sorted(rel(p) for p in BENCH.glob("*.py"))
    assert not loose, f"scripts belong in a purpose folder of bench/: {loose}"
    assert not (BENCH / "results").exists(), "results live beside their purpose: bench/*/results/"


def test_nothing_imports_a_study() -> None:
    study_modules = stems([p for p in SOURCES if in_studies(p)])
    assert study_modules, "no study script found"
    bad = []
    for path in SOURCES:
        if not any(word in source(path) for word in ["studies", *study_modules]):
            continue  # cannot import one (parsing every file costs seconds)
        for line, module in imported(path):
            top = module.split(".")[0]
            if module.startswith("bench.studies") or (
                top in study_modules and study_modules[top] != path
            ):
                bad.append(f"{rel(path)}:{line} imports {module}")
        if not in_studies(path):
            bad += [f"{rel(path)}:{line} loads from studies/" for line in loads_a_study(path)]
    assert not bad, (
        "studies are imported by nothing (shared code goes in bench/lib):\n" + "\n".join(bad)
    )


def test_bench_scripts_import_only_bench_lib() -> None:
    """A script that others need is split: its importable part in bench/lib/, the runnable
    script in its purpose folder importing it."""
    scripts = stems([p for p in SOURCES if BENCH in p.parents and BENCH / "lib" not in p.parents])
    bad = []
    for path in SOURCES:
        if BENCH not in path.parents and "bench." not in source(path):
            continue
        for line, module in imported(path):
            top = module.split(".")[0]
            if module.startswith("bench.") and not module.startswith("bench.lib"):
                bad.append(f"{rel(path)}:{line} imports {module}")
            elif BENCH in path.parents and top in scripts and scripts[top] != path:
                bad.append(f"{rel(path)}:{line} imports the script {rel(scripts[top])}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "study",
    sorted(p for p in STUDIES.iterdir() if p.is_dir() and p.name != "__pycache__"),
    ids=lambda p: p.name,
)
def test_every_study_has_a_readme(study: Path) -> None:
    assert DATED.fullmatch(study.name), f"{rel(study)}: name it <YYYY-MM-DD>-<topic>"
    readme = study / "README.md"
    assert readme.is_file(), f"{rel(study)} has no README.md (question, result, decision)"
    assert len(readme.read_text(encoding="utf-8").strip().splitlines()) >= 3, rel(readme)
    assert list(study.glob("*.py")), f"{rel(study)} holds no script"


def cited_results(text: str) -> list[str]:
    """The result files a page cites (placeholders such as ``<dataset>`` and ``NAME`` as
    globs), braces expanded."""
    out = []
    for raw in CITED.findall(text):
        raw = re.sub(r"<[^>]*>|\b[A-Z][A-Z_]+\b", "*", raw)
        for path in expand_braces(raw):
            if re.search(r"\.(md|json|png)$|/results/", path) and Path(path).name != "README.md":
                out.append(path)
    return out


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_cited_result_files_exist(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    missing = [p for p in cited_results(text) if not list(ROOT.glob(p))]
    assert not missing, f"{rel(doc)} cites missing result files: {missing}"
    short = [text[m.start() : m.start() + 40] for m in SHORT.finditer(text)]
    assert not short, f"{rel(doc)}: cite results by their path under bench/: {short}"


def test_the_docs_cite_results() -> None:
    """The check above has something to check."""
    cited = [p for doc in DOCS for p in cited_results(doc.read_text(encoding="utf-8"))]
    assert any("bench/perf/results/" in p for p in cited)
    assert any("bench/quality/results/" in p for p in cited)
    assert any("bench/correctness/results/" in p for p in cited)
    assert any("bench/studies/" in p for p in cited)
