"""Dataset loading (pglogic.eval.data) and derived logical queries (pglogic.eval.derive); pure tests.

Every derived query is checked against a brute-force evaluation of its formula on every
document's label set, on a synthetic dataset and on the shared datasets.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pglogic.errors import InvalidInput
from pglogic.eval.data import Dataset, arxiv_category_names, load_dataset
from pglogic.eval.derive import (
    CHAIN_TEMPLATES,
    ITLR_TEMPLATES,
    NSFL_TEMPLATES,
    PER_TEMPLATE,
    TEMPLATES,
    Derived,
    EvalQuery,
    derive_queries,
    satisfies,
    summarize,
    thresholds,
    to_text,
)
from pglogic.query import And, Node, Not, Or, Term, parse, to_string

ROOT = Path(__file__).resolve().parents[1]
ID_PATTERN = re.compile(r"^(itlr3-\d\d|and[2-8]|or[2-8]|nsfl-[A-Za-z]+)-\d{4}$")


# -- helpers -----------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    text = "".join(json.dumps(row) + "\n" for row in rows)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def synthetic_rows(n: int = 120, seed: int = 7) -> list[dict[str, Any]]:
    """Documents with related labels (grain group, energy group, metals), an alias pair
    (``alias-a``/``alias-b`` always together) and a label on a single document."""
    rng = random.Random(seed)
    groups = [
        ["grain", "wheat", "corn", "barley", "soy_meal"],
        ["crude", "nat-gas", "acq", "hep-th"],
        ["gold", "silver", "palm-oil"],
    ]
    rows = []
    for i in range(n):
        group = groups[i % 3]
        labels = sorted(set(rng.sample(group, rng.randint(1, min(4, len(group))))))
        if rng.random() < 0.15:
            labels.append(rng.choice(groups[(i + 1) % 3]))
        if i % 7 == 0:
            labels += ["alias-a", "alias-b"]
        if i == 5:
            labels.append("single")
        rows.append({"id": f"doc-{i:03d}", "text": f"document {i}", "labels": sorted(set(labels))})
    return rows


def make_dataset(
    directory: Path,
    rows: list[dict[str, Any]] | None = None,
    *,
    labels: list[dict[str, Any]] | None = None,
    queries: list[dict[str, Any]] | None = None,
    gz: bool = False,
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    write_jsonl(directory / ("corpus.jsonl.gz" if gz else "corpus.jsonl"), rows or [])
    if labels is not None:
        (directory / "labels.json").write_text(json.dumps({"labels": labels}))
    if queries is not None:
        write_jsonl(directory / "queries.jsonl", queries)
    return directory


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    rows = synthetic_rows()
    directory = make_dataset(
        tmp_path_factory.mktemp("data") / "synthetic",
        rows,
        labels=[{"label": "acq", "name": "Mergers/Acquisitions", "count": 1}],
        queries=[
            {
                "id": "q1",
                "text": "grain but not corn",
                "logical": '"grain" AND NOT "corn"',
                "relevant": ["doc-000"],
                "negatives": ["doc-003"],
            },
            {"text": "wheat", "relevant": ["doc-003", "doc-006"]},
        ],
    )
    return load_dataset(directory)


@pytest.fixture(scope="module")
def synthetic_derived(synthetic: Dataset) -> Derived:
    return derive_queries(synthetic)


def shared(shared_data: Path, name: str) -> Dataset:
    path = shared_data / name
    if not path.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing")
        pytest.skip(f"{path} is missing")
    return load_dataset(path)


_LOADED: dict[str, tuple[Dataset, Derived]] = {}


def loaded(shared_data: Path, name: str) -> tuple[Dataset, Derived]:
    if name not in _LOADED:
        ds = shared(shared_data, name)
        _LOADED[name] = (ds, derive_queries(ds))
    return _LOADED[name]


# -- brute force -------------------------------------------------------------------------------


def holds(node: Node, labels: frozenset[str], label_of: Mapping[str, str]) -> bool:
    """Independent recursive evaluator of a formula on one label set."""
    if isinstance(node, Term):
        return label_of[node.text] in labels
    if isinstance(node, Not):
        return not holds(node.child, labels, label_of)
    if isinstance(node, And):
        return all(holds(c, labels, label_of) for c in node.children)
    assert isinstance(node, Or)
    return any(holds(c, labels, label_of) for c in node.children)


def positive_part(node: Node, labels: frozenset[str], label_of: Mapping[str, str]) -> bool:
    """The formula with every negated literal replaced by TRUE."""
    if isinstance(node, Term):
        return label_of[node.text] in labels
    if isinstance(node, Not):
        return True
    if isinstance(node, And):
        return all(positive_part(c, labels, label_of) for c in node.children)
    assert isinstance(node, Or)
    return any(positive_part(c, labels, label_of) for c in node.children)


def negated_labels(node: Node, label_of: Mapping[str, str], under: bool = False) -> set[str]:
    if isinstance(node, Term):
        return {label_of[node.text]} if under else set()
    if isinstance(node, Not):
        return negated_labels(node.child, label_of, True)
    return set().union(*(negated_labels(c, label_of, under) for c in node.children))


def count_nots(node: Node) -> int:
    if isinstance(node, Term):
        return 0
    if isinstance(node, Not):
        return 1 + count_nots(node.child)
    return sum(count_nots(c) for c in node.children)


def check_derived(ds: Dataset, derived: Derived, *, check_satisfies: bool = False) -> None:
    """Every derived query against brute force and the sampling rules."""
    by_labels: dict[frozenset[str], list[str]] = {}
    for doc_id, labels in zip(ds.doc_ids, ds.labels, strict=True):
        by_labels.setdefault(labels, []).append(doc_id)
    label_docs = ds.label_docs()
    limits = thresholds(ds)
    n = len(ds.doc_ids)
    given_ids = {f"given-{q.id}" for q in ds.queries}
    ids = [q.id for q in derived.queries]
    assert len(ids) == len(set(ids))
    keys = set()
    for q in derived.queries:
        if q.group == "given":
            assert q.id in given_ids
            continue
        assert ID_PATTERN.match(q.id), q.id
        assert q.n_terms == len(q.labels) == len(set(q.labels))
        texts = [ds.term_text[label] for label in q.labels]
        assert len(set(texts)) == len(texts), "two labels with the same term text"
        label_of = dict(zip(texts, q.labels, strict=True))
        assert q.term_labels == label_of
        # no alias pairs (identical document sets)
        doc_sets = [label_docs[label] for label in q.labels]
        assert len(set(doc_sets)) == len(doc_sets), f"alias pair in {q.logical}"
        # related terms: every label shares a document with another label of the formula
        if len(q.labels) > 1:
            for i, docs in enumerate(doc_sets):
                assert any(docs & other for j, other in enumerate(doc_sets) if j != i), q.logical
        assert parse(q.logical) == q.tree
        assert q.n_negations == count_nots(q.tree) == q.logical.count("NOT ")

        relevant: set[str] = set()
        traps: set[str] = set()
        negated = negated_labels(q.tree, label_of)
        for labels, docs in by_labels.items():
            ok = holds(q.tree, labels, label_of)
            if check_satisfies:
                assert ok == satisfies(q.tree, labels, q.term_labels)
            if ok:
                relevant.update(docs)
            elif negated and labels & negated and positive_part(q.tree, labels, label_of):
                traps.update(docs)
        assert q.relevant == relevant, q.logical
        assert q.negatives == traps, q.logical
        assert limits["min_relevant"] <= len(q.relevant) <= n * 0.5
        if q.n_negations:
            assert q.negatives, f"no trap for {q.logical}"
        else:
            assert not q.negatives
        key = (q.template, q.logical)
        assert key not in keys
        keys.add(key)


# -- templates ---------------------------------------------------------------------------------


def test_exactly_32_distinct_itlr_templates() -> None:
    assert len(ITLR_TEMPLATES) == 32
    assert len({t.name for t in ITLR_TEMPLATES}) == 32
    assert len({to_string(t.skeleton) for t in ITLR_TEMPLATES}) == 32
    assert all(t.slots == ("t1", "t2", "t3") for t in ITLR_TEMPLATES)
    ops = {tuple(re.findall(r"\b(AND|OR)\b", t.name)) for t in ITLR_TEMPLATES}
    assert ops == {("AND", "AND"), ("AND", "OR"), ("OR", "AND"), ("OR", "OR")}
    assert sorted(t.name.count("NOT") for t in ITLR_TEMPLATES) == sorted(
        [0] * 4 + [1] * 12 + [2] * 12 + [3] * 4
    )
    assert [t.key for t in ITLR_TEMPLATES] == [f"itlr3-{i:02d}" for i in range(32)]


def test_itlr_precedence() -> None:
    tree = parse('"t1" OR "t2" AND NOT "t3"')
    assert tree == Or((Term("t1"), And((Term("t2"), Not(Term("t3"))))))
    by_name = {t.name: t.skeleton for t in ITLR_TEMPLATES}
    assert by_name["t1 OR t2 AND NOT t3"] == tree
    assert by_name["NOT t1 AND t2 OR t3"] == Or((And((Not(Term("t1")), Term("t2"))), Term("t3")))
    assert by_name["t1 AND t2 AND t3"] == And((Term("t1"), Term("t2"), Term("t3")))


def test_chain_and_nsfl_templates() -> None:
    assert [t.name for t in CHAIN_TEMPLATES] == [f"AND x{n}" for n in range(2, 9)] + [
        f"OR x{n}" for n in range(2, 9)
    ]
    assert to_string(CHAIN_TEMPLATES[3].skeleton) == '"t1" AND "t2" AND "t3" AND "t4" AND "t5"'
    assert [t.name for t in NSFL_TEMPLATES] == ["A∧B", "A∧B∧C", "A∧¬B", "A∧B∧¬C", "A∨B", "A∨B∨C"]
    assert to_string(NSFL_TEMPLATES[3].skeleton) == '"A" AND "B" AND NOT "C"'
    assert len({t.name for t in TEMPLATES}) == len(TEMPLATES) == 32 + 14 + 6
    assert len({t.key for t in TEMPLATES}) == len(TEMPLATES)


# -- to_text / satisfies -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ('"grain" AND "wheat" AND NOT "corn"', "grain and wheat but not corn"),
        ('"crude" OR "natural gas"', "crude or natural gas"),
        ('"A" AND NOT "B"', "A but not B"),
        ('NOT "a" AND "b"', "not a and b"),
        ('"a" AND NOT "b" AND NOT "c"', "a but not b and not c"),
        ('"a" AND NOT "b" AND "c"', "a but not b and c"),
        ('"a" OR NOT "b"', "a or not b"),
        ('NOT "a"', "not a"),
        ('("a" OR "b") AND "c"', "(a or b) and c"),
        ('"a" OR "b" AND "c"', "a or b and c"),
        ('NOT ("a" AND "b")', "not (a and b)"),
        ('"a" AND NOT ("b" OR "c")', "a but not (b or c)"),
        ('"t1" OR "t2" AND NOT "t3"', "t1 or t2 but not t3"),
    ],
)
def test_to_text(query: str, text: str) -> None:
    assert to_text(parse(query)) == text


def test_satisfies() -> None:
    tree = parse('"grain" AND NOT "corn" OR "gold"')
    assert satisfies(tree, {"grain"})
    assert not satisfies(tree, {"grain", "corn"})
    assert satisfies(tree, {"grain", "corn", "gold"})
    assert satisfies(parse('"Crude Oil"'), {"crude"}, {"Crude Oil": "crude"})
    assert not satisfies(parse('"Crude Oil"'), {"crude"})


# -- derived queries ---------------------------------------------------------------------------


def test_synthetic_queries_match_brute_force(
    synthetic: Dataset, synthetic_derived: Derived
) -> None:
    derived = synthetic_derived
    check_derived(synthetic, derived, check_satisfies=True)
    counts = summarize(derived)
    assert counts["itlr3"] > 0 and counts["chain"] > 0 and counts["nsfl"] > 0
    assert counts["given"] == 2
    assert sum(counts.values()) == len(derived.queries)
    # the alias pair and the single-document label never appear together / at all
    for q in derived.queries:
        assert not {"alias-a", "alias-b"} <= set(q.labels)
        assert "single" not in q.labels
    assert derived.thresholds["min_relevant"] == 5
    # the Stack-Exchange-style de-hyphenation and labels.json names are the query terms
    terms_used = {t for q in derived.queries for t in q.term_labels}
    assert "Mergers/Acquisitions" in terms_used or "soy meal" in terms_used


def test_synthetic_skipped_reasons(synthetic_derived: Derived) -> None:
    derived = synthetic_derived
    names = {t.name for t in TEMPLATES}
    assert set(derived.skipped) <= names
    for template, reason in derived.skipped.items():
        got = sum(q.template == template for q in derived.queries)
        assert reason.startswith(f"{got} of {PER_TEMPLATE}: "), reason
    # "NOT t1 OR NOT t2 OR NOT t3" is (almost) the whole corpus
    assert "more than 50% of the corpus relevant" in derived.skipped["NOT t1 OR NOT t2 OR NOT t3"]
    full = {t.name for t in TEMPLATES} - set(derived.skipped)
    for name in full:
        assert sum(q.template == name for q in derived.queries) == PER_TEMPLATE


def test_given_queries(synthetic: Dataset, synthetic_derived: Derived) -> None:
    derived = synthetic_derived
    given = [q for q in derived.queries if q.group == "given"]
    assert [q.id for q in given] == ["given-q1", "given-2"]
    q1, q2 = given
    assert q1.tree == parse('"grain" AND NOT "corn"') and q1.text == "grain but not corn"
    assert q1.relevant == {"doc-000"} and q1.negatives == {"doc-003"}
    assert (q1.n_terms, q1.n_negations, q1.labels, q1.template) == (2, 1, (), "given")
    assert q2.tree == Term("wheat") and q2.negatives == frozenset()
    few = derive_queries(synthetic, per_template=1, max_given=1)
    assert [q.id for q in few.queries if q.group == "given"] == ["given-q1"]
    assert summarize(derive_queries(synthetic, per_template=1, include_given=False))["given"] == 0


def test_deterministic(synthetic: Dataset, synthetic_derived: Derived) -> None:
    a = synthetic_derived
    b = derive_queries(synthetic)
    assert a == b
    assert a.queries == b.queries and a.skipped == b.skipped
    c = derive_queries(synthetic, per_template=3, seed=1)
    small = derive_queries(synthetic, per_template=3)
    assert [q.logical for q in c.queries] != [q.logical for q in small.queries]
    assert all(sum(q.template == t.name for q in small.queries) <= 3 for t in TEMPLATES)


DIGEST_SCRIPT = """
import hashlib, sys
from pathlib import Path
from pglogic.eval.derive import derive_queries
from pglogic.eval.data import load_dataset
d = derive_queries(load_dataset(Path(sys.argv[1])), per_template=3)
h = hashlib.sha256()
for q in d.queries:
    h.update(repr((q.id, q.logical, sorted(q.relevant), sorted(q.negatives))).encode())
h.update(repr(sorted(d.skipped.items())).encode())
print(h.hexdigest())
"""


def test_independent_of_hash_seed(synthetic: Dataset) -> None:
    """Sampling never depends on set/dict iteration order (string hashing)."""
    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", DIGEST_SCRIPT, str(synthetic.path)],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        digests.add(out.stdout.strip())
    assert len(digests) == 1
    here = derive_queries(synthetic, per_template=3)
    h = hashlib.sha256()
    for q in here.queries:
        h.update(repr((q.id, q.logical, sorted(q.relevant), sorted(q.negatives))).encode())
    h.update(repr(sorted(here.skipped.items())).encode())
    assert digests == {h.hexdigest()}


def test_tiny_dataset_without_usable_labels(tmp_path: Path) -> None:
    ds = load_dataset(make_dataset(tmp_path / "tiny", [{"id": "a", "labels": ["x"]}]))
    derived = derive_queries(ds)
    assert derived.queries == ()
    assert derived.skipped["A∧B"] == f"0 of {PER_TEMPLATE}: no usable label"
    assert derive_queries(ds, per_template=0).skipped == {}


def test_eval_query_properties() -> None:
    q = EvalQuery(
        "nsfl-AandnotB-0001",
        "A∧¬B",
        "nsfl",
        parse('"Crude Oil" AND NOT "Natural Gas"'),
        ("crude", "nat-gas"),
        frozenset({"d1"}),
        frozenset({"d2"}),
        2,
        1,
    )
    assert q.logical == '"Crude Oil" AND NOT "Natural Gas"'
    assert q.text == "Crude Oil but not Natural Gas"
    assert q.term_labels == {"Crude Oil": "crude", "Natural Gas": "nat-gas"}


# -- shared datasets ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["limit_small", "reuters21578", "arxiv_0704", "stackexchange_cooking_robotics"]
)
def test_shared_queries_match_brute_force(shared_data: Path, name: str) -> None:
    ds, derived = loaded(shared_data, name)
    check_derived(ds, derived)
    counts = summarize(derived)
    assert counts["itlr3"] >= 50 and counts["chain"] >= 50 and counts["nsfl"] >= 40


def test_limit_small_thresholds(shared_data: Path) -> None:
    _, derived = loaded(shared_data, "limit_small")
    assert derived.thresholds["min_label_docs"] == 2
    assert derived.thresholds["min_relevant"] == 1
    templates = {q.template for q in derived.queries}
    assert {"A∧B", "A∧¬B", "AND x2", "t1 AND NOT t2 AND NOT t3"} <= templates
    assert summarize(derived)["given"] == 1000
    assert next(q for q in derived.queries if q.group == "given").text == "Who likes Joshua Trees?"


def test_reuters_thresholds_and_terms(shared_data: Path) -> None:
    ds, derived = loaded(shared_data, "reuters21578")
    assert derived.thresholds["min_relevant"] == 5
    assert all(len(q.relevant) >= 5 for q in derived.queries)
    assert len(ds.doc_ids) == 10789
    assert (ds.term_text["acq"], ds.term_source["acq"]) == (
        "Mergers/Acquisitions",
        "labels.json name",
    )
    assert (ds.term_text["palm-oil"], ds.term_source["palm-oil"]) == (
        "palm oil",
        "label (de-hyphenated)",
    )
    assert ds.term_text["nat-gas"] == "Natural Gas"
    assert set(ds.term_source.values()) == {"labels.json name", "label (de-hyphenated)"}


def test_arxiv_aliases_and_names(shared_data: Path) -> None:
    ds, derived = loaded(shared_data, "arxiv_0704")
    docs = ds.label_docs()
    assert docs["math-ph"] == docs["math.MP"]
    for q in derived.queries:
        assert not {"math-ph", "math.MP"} <= set(q.labels)
        assert not {"cs.IT", "math.IT"} <= set(q.labels)
        assert not {"math.ST", "stat.TH"} <= set(q.labels)
    assert set(ds.term_source.values()) == {"arXiv taxonomy"}
    assert ds.term_text["hep-th"] == "High Energy Physics - Theory"


def test_stackexchange_terms(shared_data: Path) -> None:
    ds, _ = loaded(shared_data, "stackexchange_cooking_robotics")
    assert (ds.term_text["food-safety"], ds.term_source["food-safety"]) == (
        "food safety",
        "label (de-hyphenated)",
    )


def test_arxiv_codes_all_have_names(shared_data: Path) -> None:
    path = shared_data / "arxiv_0704" / "labels.json"
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    codes = {entry["label"] for entry in json.loads(path.read_text())["labels"]}
    names = arxiv_category_names()
    assert len(codes) == 125
    assert codes <= set(names)
    assert all(names[c] and names[c] == names[c].strip() for c in codes)


def test_arxiv_names_builtin() -> None:
    names = arxiv_category_names()
    assert names["astro-ph"] == "Astrophysics"
    assert names["hep-th"] == "High Energy Physics - Theory"
    assert names["cond-mat.mes-hall"] == "Mesoscale and Nanoscale Physics"
    assert names["math.AG"] == "Algebraic Geometry"
    assert names["math-ph"] == names["math.MP"] == "Mathematical Physics"
    assert names["q-bio.PE"] == "Populations and Evolution"
    assert names["cs.IT"] == "Information Theory"
    assert names["cond-mat.other"] == "Other Condensed Matter"
    assert names["physics.gen-ph"] == "General Physics"


# -- load_dataset ------------------------------------------------------------------------------


def test_term_sources(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "labels": ["acq", "hep-th", "palm-oil", "soy_meal", "cs.IT"]},
        {"id": 2, "labels": ["acq"]},
    ]
    labels = [
        {"label": "acq", "name": "Mergers/Acquisitions", "count": 2},
        {"label": "palm-oil", "name": None, "count": 1},
        {"label": "soy_meal", "count": 1},
        {"label": "cs.IT", "name": "Info  Theory ", "count": 1},
    ]
    directory = make_dataset(tmp_path / "d", rows, labels=labels, gz=True)
    ds = load_dataset(directory)
    assert ds.doc_ids == ("a", "2")
    assert ds.corpus_file.name == "corpus.jsonl.gz" and ds.name == "d"
    assert ds.term_text == {
        "acq": "Mergers/Acquisitions",
        "cs.IT": "Info Theory",
        "hep-th": "High Energy Physics - Theory",
        "palm-oil": "palm oil",
        "soy_meal": "soy meal",
    }
    assert ds.term_source == {
        "acq": "labels.json name",
        "cs.IT": "labels.json name",
        "hep-th": "arXiv taxonomy",
        "palm-oil": "label (de-hyphenated)",
        "soy_meal": "label (de-hyphenated)",
    }
    names = tmp_path / "names.json"
    names.write_text(json.dumps({"acq": "company takeovers", "hep-th": "string theory"}))
    ds = load_dataset(directory, names=names)
    assert ds.term_text["acq"] == "company takeovers"
    assert ds.term_text["hep-th"] == "string theory"
    assert ds.term_source["acq"] == ds.term_source["hep-th"] == "names file"
    assert ds.term_source["cs.IT"] == "labels.json name"
    assert ds.label_docs() == {
        "acq": frozenset({"a", "2"}),
        "cs.IT": frozenset({"a"}),
        "hep-th": frozenset({"a"}),
        "palm-oil": frozenset({"a"}),
        "soy_meal": frozenset({"a"}),
    }


def expect_error(path: Path, fragment: str, **kw: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        load_dataset(path, **kw)
    assert fragment in str(info.value), str(info.value)


def test_error_bad_json_line(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "corpus.jsonl").write_text('{"id": "a", "labels": []}\n{"id": "b", "labels": [}\n')
    expect_error(d, f"{d / 'corpus.jsonl'}, line 2: invalid JSON (Expecting value)")


def test_error_missing_files(tmp_path: Path) -> None:
    expect_error(tmp_path / "nope", f"Dataset directory not found: {tmp_path / 'nope'}")
    (tmp_path / "empty").mkdir()
    expect_error(tmp_path / "empty", f"No corpus.jsonl or corpus.jsonl.gz in {tmp_path / 'empty'}")
    d = make_dataset(tmp_path / "d", [{"id": "a", "labels": ["x"]}])
    expect_error(d, f"{tmp_path / 'missing.json'}: file not found", names=tmp_path / "missing.json")


def test_error_duplicate_and_missing_fields(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {"id": "a", "labels": []},
        {"id": "b", "labels": []},
        {"id": "a", "labels": ["x"]},
    ]
    d = make_dataset(tmp_path / "dup", rows)
    expect_error(d, "corpus.jsonl, line 3: duplicate id 'a' (first on line 1)")
    d = make_dataset(tmp_path / "noid", [{"text": "x", "labels": []}])
    expect_error(d, "corpus.jsonl, line 1: missing 'id'")
    d = make_dataset(tmp_path / "nolabels", [{"id": "a", "labels": []}, {"id": "b", "text": "x"}])
    expect_error(d, "corpus.jsonl, line 2: missing 'labels'")
    d = make_dataset(tmp_path / "badlabels", [{"id": "a", "labels": "x"}])
    expect_error(d, "corpus.jsonl, line 1: 'labels' must be a list of strings")
    d = tmp_path / "array"
    d.mkdir()
    (d / "corpus.jsonl").write_text("[1, 2]\n")
    expect_error(d, "corpus.jsonl, line 1: expected a JSON object")


def test_error_queries(tmp_path: Path) -> None:
    rows = [{"id": "a", "labels": ["x"]}, {"id": "b", "labels": ["y"]}]
    d = make_dataset(
        tmp_path / "rel",
        rows,
        queries=[
            {"text": "ok", "relevant": ["a"]},
            {"text": "bad", "relevant": ["a", "zz"]},
        ],
    )
    expect_error(d, "queries.jsonl, line 2: relevant ids not in the corpus: 'zz'")
    d = make_dataset(
        tmp_path / "logical",
        rows,
        queries=[
            {"id": "q", "text": "x", "logical": '"x" AND', "relevant": ["a"]},
        ],
    )
    expect_error(
        d,
        "queries.jsonl, line 1: 'logical' does not parse: Expected a quoted term after AND at col 5",
    )
    d = make_dataset(tmp_path / "norel", rows, queries=[{"text": "x"}])
    expect_error(d, "queries.jsonl, line 1: missing 'relevant'")
    d = make_dataset(
        tmp_path / "neg",
        rows,
        queries=[
            {"text": "x", "relevant": ["a"], "negatives": ["nope"]},
        ],
    )
    expect_error(d, "queries.jsonl, line 1: negatives ids not in the corpus: 'nope'")
    d = make_dataset(tmp_path / "empty", rows, queries=[{"text": "x", "relevant": []}])
    expect_error(
        d, "queries.jsonl, line 1: 'relevant' is empty (a query needs a relevant document)"
    )


def test_integer_ids_in_queries(tmp_path: Path) -> None:
    rows = [{"id": 1, "labels": ["x"]}, {"id": 2, "labels": ["y"]}]
    d = make_dataset(tmp_path / "ints", rows, queries=[{"text": "x", "relevant": [1]}])
    assert load_dataset(d).queries[0].relevant == frozenset({"1"})


@pytest.mark.parametrize("name", ["reuters21578", "arxiv_0704", "limit_small"])
def test_no_formula_is_drawn_twice_across_templates(shared_data: Path, name: str) -> None:
    """``AND x3``, ``t1 AND t2 AND t3`` and ``A∧B∧C`` share a shape: one formula counts once."""

    def canonical(node: Node) -> str:
        if isinstance(node, Term):
            return repr(node.text)
        if isinstance(node, Not):
            return f"NOT({canonical(node.child)})"
        op = "AND" if isinstance(node, And) else "OR"
        return f"{op}({','.join(sorted(canonical(c) for c in node.children))})"

    _, derived = loaded(shared_data, name)
    keys = [canonical(q.tree) for q in derived.queries if q.group != "given"]
    assert len(keys) == len(set(keys))


def test_error_labels_json(tmp_path: Path) -> None:
    d = make_dataset(tmp_path / "d", [{"id": "a", "labels": ["x"]}])
    (d / "labels.json").write_text('{"labels": {"x": 1}}')
    expect_error(d, "labels.json: expected an object with a 'labels' list")
