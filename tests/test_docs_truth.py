"""The numbers the README and docs/*.md quote are in the results files they cite.

A *unit* of a page is a paragraph, a list item or a table row. A unit cites a results file when it
names a file under ``bench/`` ending in ``.md`` or ``.json`` (backticked or linked, or a bare
backticked name such as ``scale_1m.md`` that is one file's name under ``bench/``). A unit that
cites nothing inherits: a table row the citations of its header, else (and a list item) those of
the last paragraph before it in its section, the one that introduces the table or list (the
README's speed table is introduced by "... (`bench/perf/results/scale_1m.md`)").

Every number a citing unit states (0.96, 4.9×, 82%, 34,600, 11.2k, 3.7e-6; both ends of 0.96–1.00)
must be in one of its cited files, up to the rounding the doc shows (:func:`found`), except the
numbers :func:`excluded` says are not measurements (versions, dates, names, settings and setups
the docs define, code) and the entries of :data:`ALLOWED` (derived or earlier numbers, each with
where it comes from). Pure file reading: no database, no model.

When a result changes, the failure names each doc line that quotes the old number and the files
it was checked against.

Every cited results file also records what it was measured with (:mod:`bench.lib.provenance`: a
line ``Measured at commit ... with engine defaults ...`` after a Markdown file's title, the key
``"provenance"`` of a JSON object), and a result measured under other engine defaults than
today's (:func:`pglogic.engine.defaults.fingerprint`) fails unless :data:`INDEPENDENT` says why it
does not depend on them or :data:`STALE` lists it as a debt to rerun. The frozen studies
(``bench/studies/``) are exempt: each answered one question once, under the defaults of its day.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from pathlib import Path

import pytest

from bench.lib import provenance
from pglogic.engine.defaults import fingerprint
from tests.conftest import expand_braces

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# -- units and their citations -------------------------------------------------------------------

FENCE = re.compile(r"^\s*```")
TABLE_ROW = re.compile(r"^\s*\|")
TABLE_RULE = re.compile(r"^\s*\|[\s:|-]+\|\s*$")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")
HEADING = re.compile(r"^#{1,6}\s")
#: A path under bench/ (``{md,json}`` alternatives and ``<dataset>`` placeholders allowed).
CITED_PATH = re.compile(r"(?<![\w/.])bench/[A-Za-z0-9_./{},<>*-]*[A-Za-z0-9_}>*]")
#: A bare backticked file name: `scale_1m.md`, `citus.md`.
BARE_NAME = re.compile(r"`([A-Za-z0-9_.-]+\.(?:md|json))`")
#: Under bench/ but not results: the folder's own guide and the labelling instructions.
NOT_RESULTS = {BENCH / "README.md", BENCH / "quality" / "nl" / "real" / "LABELLING.md"}


@dataclass
class Unit:
    path: Path
    line: int  # 1-based line of the unit's first line
    kind: str  # "paragraph", "item", "row"
    text: str
    cites: list[Path] = field(default_factory=list)

    def where(self, offset: int = 0) -> str:
        line = self.line + self.text.count("\n", 0, offset)
        return f"{self.path.relative_to(ROOT)}:{line}"


@cache
def _results_by_name() -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for p in sorted([*BENCH.rglob("*.md"), *BENCH.rglob("*.json")]):
        if p not in NOT_RESULTS:
            out.setdefault(p.name, []).append(p)
    return out


def cited_files(text: str) -> list[Path]:
    """The results files (.md, .json under bench/) a piece of a page names."""
    out: list[Path] = []
    for raw in CITED_PATH.findall(text):
        raw = re.sub(r"<[^>]*>", "*", raw)  # bench/quality/<dataset>/results.md
        for path in expand_braces(raw):
            if path.endswith((".md", ".json")):
                out += [p for p in sorted(ROOT.glob(path)) if p not in NOT_RESULTS]
    for name in BARE_NAME.findall(text):
        if "/" not in name and len(found := _results_by_name().get(name, [])) == 1:
            out += found  # a unique file name is a path
    return list(dict.fromkeys(out))


def units(path: Path) -> list[Unit]:
    """The paragraphs, list items and table rows of a page (not headings, not code blocks), each
    with the results files it cites: its own; else, for a row, those of its table's header; else,
    for a row or an item, those of the last paragraph before it in its section (the paragraph
    that introduces the table or the list)."""
    parsed: list[tuple[Unit, int, list[Path]]] = []  # unit, section, header citations
    cur: Unit | None = None  # the paragraph or item a further line continues
    in_fence = False
    section = 0
    header: list[Path] | None = None  # the current table's header's citations
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            in_fence, cur = not in_fence, None
        elif in_fence:
            continue
        elif HEADING.match(line) or not line.strip():
            section += bool(HEADING.match(line))
            cur, header = None, None
        elif TABLE_ROW.match(line):
            cur = None
            if header is None:
                header = cited_files(line)
            elif not TABLE_RULE.match(line):
                parsed.append((Unit(path, i, "row", line), section, header))
        elif LIST_ITEM.match(line) or cur is None:
            cur = Unit(path, i, "item" if LIST_ITEM.match(line) else "paragraph", line)
            parsed.append((cur, section, []))
        else:
            cur.text += "\n" + line
    intro: list[Path] = []  # the citations of the section's last paragraph so far
    last_section = -1
    for unit, sec, head in parsed:
        if sec != last_section:
            intro, last_section = [], sec
        own = cited_files(unit.text)
        if unit.kind == "paragraph":
            unit.cites = intro = own
        else:
            unit.cites = own or head or list(intro)
    return [unit for unit, _, _ in parsed]


# -- the numbers a unit states -------------------------------------------------------------------

#: Not text: code spans, link targets, images' addresses, HTML comments. Numbers in them are
#: names, options and paths (`--per-template 50`, `scale_1m.md`, `#with-a-not-blend-not`).
NOT_TEXT = re.compile(r"`[^`\n]*`|\]\([^)\s]*\)|<!--.*?-->|https?://\S+", re.S)
#: Dates (2026-11-27) and clock times (13:43): blanked as a whole.
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}:\d{2}\b")
#: A number: 3.7e-64 / 34,600 / 1,000,000.5 / 0.96 / 17 / 0.8.2 (a version: excluded below).
NUMBER = re.compile(
    r"\d+(?:\.\d+)?e[-+−]?\d+\b|\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,])|\d+(?:\.\d+)*"
)
#: What may follow a number and stays part of the quantity: a percentage, a factor, a multiplier.
SUFFIX = re.compile(r"\s?(%|×|x(?![A-Za-z])|k(?![A-Za-z])|M(?![A-Za-z]))")
#: A range's second end, whose suffix the first end shares (85–86%, 3-17 ms, 2.1–2.9 s).
RANGE_TAIL = re.compile(r"\s?[–-]\s?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
#: Seconds after a number (or a range): the file may hold milliseconds (2.9 s for 2,860 ms).
SECONDS = re.compile(r"\s?s\b")
MILLIS = re.compile(r"\s?ms\b")
MULTIPLIER = {"k": 1000, "M": 1_000_000}
#: A percentage near these words may be a reduction (82% fewer traps than dense: a NegRecall@10
#: ratio of 0.18 in the file).
FEWER = re.compile(r"\b(?:fewer|lower|less|below|out|excluded?|reduc\w*)\b")
#: Words a version number follows ("PostgreSQL 17.9", "pgvector 0.8", "Citus 13.2", "PEP 562").
PRODUCT = re.compile(
    r"\b(?:PostgreSQL|Postgres|pgvector|Python|Citus|psycopg|numpy|torch|Linux|Qwen|Qwen2\.5|"
    r"llama\.cpp|SQLAlchemy|Alembic|Chromium|Playwright|OpenAPI|HTTP|TLS|ONNX Runtime|"
    r"sentence-transformers|onnxruntime|Debian|Ubuntu|libpq|PEP|RFC)\s?[≥>]?\s?$"
)
#: Settings the docs define or a run was given, not measurements: "k = 10", "m = 16",
#: "ef_search 40", "γ 6", "c 0.4", "λ = 0.5", "depth 400", "top 10", "(pool_size, default 4)",
#: and significance thresholds "p < 0.01" (a p-value "p 0.002", "p = 0.005" is checked, and so
#: is a measured bound "recall@10 ≥ 0.98").
SETTING = re.compile(
    r"(?:\b(?:k|m|n|c|d|ef_search|ef_construction|ef|depth|top|seed|α|β|γ|λ|τ)\s?=?"
    r"|[(,;]\s*default|\bp\s?[<≤])\s?$"
)
#: Query shapes: "AND 3", "OR 8", "NOT 2" name shapes (an integer), they are not measurements.
SHAPE = re.compile(r"\b(?:AND|OR|NOT)\s$")
#: What a run was given: "3 terms", "2 shards", "8 threads", "4 nodes".
SETUP = re.compile(r"\s?(?:terms?|shapes?|shards?|workers?|nodes?|threads?|cores?)\b")
#: A bound the doc states, not a value: "scores within 1e-9", "within 0.01 everywhere" (but a
#: time, "resumed within 0.4 s", is a measurement).
BOUND = re.compile(r"\bwithin\s$")
#: A reference to a numbered section of the page: "(1.6)", "table, 1.6)".
SECTION_REF = re.compile(r"[(,]\s?$")


@dataclass(frozen=True)
class Quote:
    unit: Unit
    offset: int  # in unit.text
    token: str  # as written, with its suffix: "82%", "4.9×", "0.96", "11.2k"
    value: Decimal  # without separators, a multiplier applied (11.2k: 11200)
    tolerance: Decimal  # half a unit of the last digit written (0.96: 0.005; 11.2k: 50)
    percent: bool  # 82%: the file may hold 82 or 0.82
    reduction: bool  # "82% fewer traps": the file may hold the ratio left, 0.18
    seconds: bool  # 2.9 s: the file may hold 2,860 (ms)
    millis: bool  # 13 ms: the file may hold 0.013 (s)

    def __str__(self) -> str:
        return f"{self.unit.where(self.offset)}: {self.token}"


def mask(text: str) -> str:
    """The text with code spans, link targets, dates and times blanked (offsets kept)."""
    for pattern in (NOT_TEXT, DATE):
        text = pattern.sub(lambda m: " " * len(m.group()), text)
    return text


def excluded(text: str, start: int, end: int, sections: frozenset[str] = frozenset()) -> str | None:
    """Why the number at text[start:end] is not a measurement, or None. ``text`` is masked;
    ``sections`` are the page's section numbers. Each rule is one kind of number the docs write
    that no results file needs to hold."""
    token = text[start:end]
    before, after = text[:start], text[end:]
    if token.count(".") > 1 or PRODUCT.search(before):
        return "version"  # 0.8.2, PostgreSQL 17.9, Python 3.12, Citus 13.2, PEP 562
    if re.fullmatch(r"(?:19|20)\d\d", token) and not SUFFIX.match(after):
        return "year"  # Faltings et al., 2025
    if len(token) > 1 and token[0] == "0" and token[1].isdigit():
        return "identifier"  # migration 0013, arXiv 0704
    if before[-1:].isalpha() or before[-1:] in {"@", "_", "/", "#", ".", "'", "\\", "§"}:
        return "name"  # p50, all-MiniLM-L6-v2 (the 6), nDCG@10, e5, x4, Qwen2.5
    if before[-1:] == "-" and before[-2:-1].isalpha():
        return "name"  # Reuters-21578, L6-v2
    if re.match(r"-?[A-Za-z]", after) and not any(
        unit.match(after) for unit in (SUFFIX, SECONDS, MILLIS)
    ):
        return "name or setup"  # 1.5B (a model's size), 384-d, 2-core, 4-bit, 3rd
    if SETTING.search(before):
        return "setting"  # k = 10, m = 16, γ 6, p < 0.01, default 4
    if SHAPE.search(before) and token.isdigit():
        return "shape"  # AND 3, NOT 2
    if SETUP.match(after):
        return "setup"  # 3 terms, 2 shards, 8 threads, 13 shapes: what a run was given
    if BOUND.search(before) and not SECONDS.match(after) and not MILLIS.match(after):
        return "bound"  # within 1e-9, within 0.01
    if token in sections and SECTION_REF.search(before) and after.startswith(")"):
        return "section"  # (1.6): section 1.6 of the page
    return None


@cache
def section_numbers(path: Path) -> frozenset[str]:
    """The numbers of a page's numbered headings ("### 1.6 Other Citus layouts": 1.6)."""
    return frozenset(re.findall(r"^#+\s+(\d+(?:\.\d+)*)\.?\s", path.read_text(), re.M))


def quotes(unit: Unit) -> Iterator[Quote]:
    """The measurements a unit states (see :func:`excluded` for what is not one)."""
    text = mask(unit.text)
    for m in NUMBER.finditer(text):
        if excluded(text, m.start(), m.end(), section_numbers(unit.path)):
            continue
        raw = m.group().replace("−", "-")
        number = Decimal(raw.replace(",", ""))
        tolerance = Decimal(5).scaleb(int(number.as_tuple().exponent) - 1)
        suffix_m = SUFFIX.match(text, m.end())
        suffix = suffix_m.group(1) if suffix_m else ""
        rest = m.end()
        if not suffix and (tail := RANGE_TAIL.match(text, m.end())):
            rest = tail.end()  # 85–86%: 85 is a percentage too
            if shared := SUFFIX.match(text, rest):
                suffix = shared.group(1)
        factor = MULTIPLIER.get(suffix, 1)
        yield Quote(
            unit,
            m.start(),
            m.group() + (suffix_m.group() if suffix_m else ""),
            number * factor,
            tolerance * factor,
            suffix == "%",
            suffix == "%" and bool(FEWER.search(text, max(0, m.start() - 200), m.end() + 200)),
            bool(SECONDS.match(text, rest)),
            bool(MILLIS.match(text, rest)),
        )


# -- the numbers of a results file ---------------------------------------------------------------


@dataclass(frozen=True)
class Numbers:
    """What a results file (or several) holds."""

    values: frozenset[Decimal]  # every number, without sign or thousands separators
    percents: frozenset[Decimal]  # those written as percentages: 82% -> 82
    ratios: frozenset[Decimal]  # those written as a two-decimal fraction: 0.18, 0.83
    seconds: frozenset[Decimal]  # those written in seconds: 0.013 s

    def __or__(self, other: Numbers) -> Numbers:
        return Numbers(
            self.values | other.values,
            self.percents | other.percents,
            self.ratios | other.ratios,
            self.seconds | other.seconds,
        )


def _json_values(node: object) -> Iterator[Decimal]:
    if isinstance(node, bool):
        return
    if isinstance(node, int):
        yield Decimal(node)
    elif isinstance(node, float):
        yield Decimal(repr(node))
    elif isinstance(node, dict):
        for v in node.values():
            yield from _json_values(v)
    elif isinstance(node, list):
        for v in node:
            yield from _json_values(v)
    elif isinstance(node, str):
        yield from (v for v, _ in _text_numbers(node))


def _text_numbers(text: str) -> Iterator[tuple[Decimal, str]]:
    """(value, how it is written: "%", "s", "ratio" or "") of each number of a text; 11.2k
    gives 11.2 and 11200."""
    for m in NUMBER.finditer(text):
        raw = m.group().replace("−", "-")
        if raw.count(".") > 1:
            continue  # a version
        value = Decimal(raw.replace(",", ""))
        suffix = SUFFIX.match(text, m.end())
        if not suffix and (tail := RANGE_TAIL.match(text, m.end())):
            suffix = SUFFIX.match(text, tail.end())  # 3–6%: 3 is a percentage too
        unit = suffix.group(1) if suffix else ""
        if unit == "%":
            yield value, "%"
        elif SECONDS.match(text, m.end()):
            yield value, "s"
        else:
            yield value, "ratio" if re.fullmatch(r"[01]\.\d\d", raw) else ""
        if unit in MULTIPLIER:
            yield value * MULTIPLIER[unit], ""


@cache
def file_numbers(path: Path) -> Numbers:
    """The numbers of a results file: as written (thousands separators dropped, k and M
    multiplied out, no sign); a JSON file's values at full precision. Not its provenance."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
        if isinstance(data, dict):
            data.pop(provenance.KEY, None)  # a commit and a fingerprint: not measurements
        values = frozenset(abs(v) for v in _json_values(data) if v.is_finite())
        return Numbers(values, frozenset(), frozenset(), frozenset())
    numbers = [(abs(v), kind) for v, kind in _text_numbers(provenance.without(text))]
    return Numbers(
        frozenset(v for v, _ in numbers),
        frozenset(v for v, kind in numbers if kind == "%"),
        frozenset(v for v, kind in numbers if kind == "ratio"),
        frozenset(v for v, kind in numbers if kind == "s"),
    )


def found(quote: Quote, numbers: Numbers) -> bool:
    """Whether the files hold what the doc wrote, up to the doc's rounding: 0.96 for 0.96, 0.960
    or 0.9612; 2.9 s for 2.9 or 2,860 (ms); 13 ms for 0.013 s. A percentage must be written as
    one (82% for 82% or 82.0 %) or as a two-decimal ratio (0.82; 0.18 for "82% fewer"): the
    nDCG@10 and NegRecall@10 tables are full of three-decimal numbers, one of which is within
    rounding of almost any percentage, so those do not count."""
    value, tol = abs(quote.value), quote.tolerance
    if quote.percent:
        wanted = [(numbers.percents, value, tol), (numbers.ratios, value / 100, tol / 100)]
        if quote.reduction:
            wanted.append((numbers.ratios, 1 - value / 100, tol / 100))
    else:
        wanted = [(numbers.values, value, tol)]
        if quote.seconds:
            wanted.append((numbers.values, value * 1000, tol * 1000))
        if quote.millis:
            wanted.append((numbers.seconds, value / 1000, tol / 1000))
    return any(abs(v - x) <= t for pool, x, t in wanted for v in pool)


# -- what is allowed not to be in the cited files ------------------------------------------------


@dataclass(frozen=True)
class Allowed:
    doc: str  # relative to the repository
    token: str  # the number as the doc writes it
    context: str  # words of the same line, to tell it from the same number elsewhere
    reason: str


#: Numbers a doc states that its cited files do not hold, each with where it comes from. Keep it
#: short: fix the doc, or cite the file that holds the number, before adding an entry.
ALLOWED = [
    # derived
    Allowed(
        "docs/benchmarks.md",
        "10,000",
        "matching rows",
        "derived: a 1 % filter of scale_1m.md's 1,000,000 rows",
    ),
    Allowed(
        "docs/evaluation.md",
        "0.027",
        "+0.006, +0.005 and",
        "derived: arXiv 0.472 -> 0.499 in feedback.md (the other two gains are in it as written)",
    ),
    Allowed(
        "docs/scaling.md",
        "0.57",
        "per 1,000 rows",
        "derived: query.md's 56.7 ms per 100k rows / 100, as the sentence says",
    ),
    Allowed(
        "docs/scaling.md",
        "2.90",
        "AND 3 floor / 3",
        "derived: scale.md's AND 3 floor at 10k, 8.7 ms, / 3 (the row's label)",
    ),
    Allowed(
        "docs/scaling.md",
        "2.70",
        "AND 5 floor / 5",
        "derived: scale.md's AND 5 floor at 1M, 13.5 ms, / 5 (the row's label)",
    ),
    # an earlier run, as the sentence says (git history of the cited file)
    Allowed(
        "docs/benchmarks.md",
        "393",
        "its exact scans with 1 % took",
        "scale_1m.md of e6e3f73 (before the metadata GIN index): NOT 2, k = 10, 1 %, exact p50",
    ),
    Allowed(
        "docs/benchmarks.md",
        "470",
        "its exact scans with 1 % took",
        "scale_1m.md of e6e3f73 (before the metadata GIN index): OR 8, k = 10, 1 %, exact p50",
    ),
    Allowed(
        "docs/evaluation.md",
        "0.0046",
        "Before migration 0014",
        "summary.md of a4d7fe8: Reuters, default vs pglogic-sqo-rerank, p (Holm)",
    ),
    Allowed(
        "docs/evaluation.md",
        "0.0029",
        "(p 0.0029)",
        "summary.md of a4d7fe8: arXiv, default vs pglogic-nsfl, p (Holm)",
    ),
    Allowed(
        "docs/natural-language.md",
        "0.821",
        "scored 0.821 here",
        "the previous prompt: bench/nl/results.md of 7e4e79e, part A exact",
    ),
    Allowed(
        "docs/natural-language.md",
        "0.867",
        "with the previous prompt",
        "the previous prompt: bench/nl/heldout/results.md of dd245d1, structural",
    ),
]


def allowed(quote: Quote) -> Allowed | None:
    doc = str(quote.unit.path.relative_to(ROOT))
    line = quote.unit.text.splitlines()[quote.unit.text.count("\n", 0, quote.offset)]
    for entry in ALLOWED:
        if entry.doc == doc and entry.token == quote.token and entry.context in line:
            return entry
    return None


# -- the checks ------------------------------------------------------------------------------------


def cited_quotes(doc: Path) -> Iterator[tuple[Quote, list[Path]]]:
    for unit in units(doc):
        if unit.cites:
            for quote in quotes(unit):
                yield quote, unit.cites


def check(doc: Path) -> tuple[int, list[str]]:
    """(how many numbers were checked, a message per number none of its files holds)."""
    checked, missing = 0, []
    for quote, cites in cited_quotes(doc):
        if allowed(quote):
            continue
        checked += 1
        numbers = file_numbers(cites[0])
        for path in cites[1:]:
            numbers |= file_numbers(path)
        if not found(quote, numbers):
            line = quote.unit.text.splitlines()[quote.unit.text.count("\n", 0, quote.offset)]
            files = ", ".join(str(p.relative_to(ROOT)) for p in cites)
            missing.append(f"{quote}  is in none of: {files}\n      {line.strip()}")
    return checked, missing


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_numbers_are_in_the_cited_results(doc: Path) -> None:
    """Each number a page quotes from a results file is in that file. A failure names the page,
    the line and the number: update the sentence to the new result (or cite the file that holds
    the number, or add a derivation to ALLOWED)."""
    _, missing = check(doc)
    assert not missing, "numbers not in the results files their text cites:\n" + "\n".join(missing)


def test_the_check_covers_the_docs() -> None:
    """Enough is checked that a parser change cannot silently check nothing: the README's speed
    and quality tables and the citing units of every page."""
    total = sum(check(doc)[0] for doc in DOCS)
    assert total >= 1200, total
    readme = {q.token for q, cites in cited_quotes(ROOT / "README.md")}
    assert {"3.51", "13.05", "0.617", "0.025", "122,669", "4.9×", "0.96", "1.00"} <= readme
    cited = {p.name for doc in DOCS for u in units(doc) for p in u.cites}
    assert {"scale_1m.md", "summary.md", "citus.md", "passages_scale.md"} <= cited


def test_every_allowed_number_is_still_quoted_and_still_missing() -> None:
    """An entry whose number left the doc, or that its files now hold, goes."""
    for entry in ALLOWED:
        hits = [
            (q, cites)
            for doc in DOCS
            if str(doc.relative_to(ROOT)) == entry.doc
            for q, cites in cited_quotes(doc)
            if allowed(q) is entry
        ]
        assert len(hits) == 1, f"{entry}: quoted {len(hits)} times"
        quote, cites = hits[0]
        numbers = file_numbers(cites[0])
        for path in cites[1:]:
            numbers |= file_numbers(path)
        assert not found(quote, numbers), f"{entry}: the cited files hold it now"


# -- what the cited results were measured with ---------------------------------------------------

#: The frozen studies: each answered one question once, under the defaults of its day, and is
#: not rerun (bench/README.md); their results carry no provenance line.
STUDIES = BENCH / "studies"

#: Cited results that do not depend on the engine's defaults (pglogic/engine/defaults.py): no
#: search whose ranking or plan a default changes is among their numbers. Keyed by the Markdown
#: file; its JSON beside it goes with it. A result stays here whatever the defaults become.
INDEPENDENT: dict[str, str] = {
    "bench/correctness/results/backup_restore.md": "dump and restore times and sizes; searches only compared before and after",
    "bench/correctness/results/failover.md": "rows lost and seconds until reads and writes resume after kill -9",
    "bench/correctness/results/reliability.md": "counts: data lost and unexpected errors under bad input, faults, load",
    "bench/correctness/results/upgrade_live.md": "failed searches, lock waits and rankings unchanged across a migration",
    "bench/perf/results/citus_partitioning.md": "EXPLAIN of a hand-written statement on a scratch partitioned table, DDL errors",
    "bench/perf/results/embed_providers.md": "the embedding models' speed and load times",
    "bench/perf/results/ingest.md": "ingest throughput and HNSW build times: no search",
    "bench/perf/results/realism.md": "the geometry of real and synthetic vectors: no search",
    "bench/quality/nl/heldout/results.md": "the LLM's rewrites of held-out questions (part A only): no retrieval",
    "bench/quality/nl/real/results.md": "the LLM's rewrites of real questions: no retrieval",
}  # fmt: skip

#: Cited results that depend on the engine's defaults but were measured under others: the debt,
#: each with what changed since its run and the command that measures it again (then commit
#: the result, update the numbers the docs quote and drop the entry). Keyed like INDEPENDENT.
#: The goal is an empty dict.
STALE: dict[str, str] = {
    # perf: latency and recall of the search plans
    "bench/perf/results/and_text_cost.md": "before passages, blend-not-or, not_context, not_mention; rerun bench/perf/and_text_cost.py (~5 min on sql_parity.py's kept 1M database)",
    "bench/perf/results/citus.md": "before blend-not-or, not_context, not_mention; rerun bench/perf/citus.py load + measure + settings (local Citus cluster, ~1 h)",
    "bench/perf/results/citus_plans.md": "before blend-not-or, not_context, not_mention; rerun bench/perf/citus.py plans --size 1000000 --shards 2",
    "bench/perf/results/ef_sweep.md": "before product-max-strong and the AND texts; rerun bench/perf/ef_sweep.py --size 1000000 (kept 1M database)",
    "bench/perf/results/ef_sweep_efc64.md": "before product-max-strong and the AND texts; rerun bench/perf/ef_sweep.py on a 1M index built with ef_construction 64",
    "bench/perf/results/ef_sweep_isotropic.md": "before product-max-strong and the AND texts; rerun bench/perf/ef_sweep.py --data isotropic",
    "bench/perf/results/filter_depth.md": "before product-max-strong and the AND texts; rerun bench/perf/filter_depth.py (~10 min, kept 1M database)",
    "bench/perf/results/fixed_cost.md": "compiles the statements of before the AND texts and NOT floors; rerun bench/perf/fixed_cost.py (~10 s, no database)",
    "bench/perf/results/guide.md": "before product-max-strong and the AND texts; rerun bench/perf/guide.py (NumPy, no database)",
    "bench/perf/results/guide_only.md": "before product-max-strong and the AND texts; rerun bench/perf/guide_only.py --real (kept 1M database, bench_quality)",
    "bench/perf/results/http_load.md": "before blend-not-or, not_context, not_mention; rerun bench/perf/http_load.py build (~17 min) and run",
    "bench/perf/results/index_rebuild.md": "its latencies predate product-max-strong and the AND texts; rerun bench/perf/index_rebuild.py (~6 min)",
    "bench/perf/results/lexical_latency.md": "before blend-not-or, not_context, not_mention; rerun bench/perf/lexical_latency.py load (~1 h), measure, ingest",
    "bench/perf/results/not_context_latency.md": "before not_mention; rerun bench/perf/not_context_latency.py (~10 min, bench_quality)",
    "bench/perf/results/passage_score_latency.md": "before not_context and not_mention; rerun bench/perf/passage_score_latency.py (~6 min, bench_quality)",
    "bench/perf/results/passages_scale.md": "before not_mention; rerun bench/perf/passages_scale.py (~1 h)",
    "bench/perf/results/query.md": "the first query benchmark, before the engine's defaults of today; rerun bench/perf/query.py (~20 min)",
    "bench/perf/results/replicas.md": "before blend-not-or, not_context, not_mention; rerun bench/perf/replicas.py (~25 min)",
    "bench/perf/results/scale.md": "the first scale run (family itlr); rerun bench/perf/scale.py --sizes 10000,100000 --merge and the 1M steps (~1 h)",
    "bench/perf/results/scale_100k_filters.md": "before product-max-strong and the AND texts; rerun bench/perf/scale.py --sizes 100000 --results scale_100k_filters",
    "bench/perf/results/scale_1m.md": "before not_mention; rerun bench/perf/scale.py --sizes 1000000 --reuse --keep --results scale_1m (~25 min + ~8 min load)",
    "bench/perf/results/scale_isotropic.md": "before the engine's defaults of today; rerun bench/perf/scale.py --data isotropic --results scale_isotropic",
    "bench/perf/results/scale_pgvector062.md": "before the engine's defaults of today; rerun bench/perf/scale.py --results scale_pgvector062 on bench/correctness/old_pgvector.py's server",
    "bench/perf/results/startup.md": "its searches and the int8 twin's top-10 fidelity predate product-max-strong; rerun bench/perf/startup.py (~3 min, the demo corpus)",
    "bench/correctness/results/sql_parity.md": "before product-max-strong and the AND texts; rerun bench/correctness/sql_parity.py --size 1000000",
    "bench/correctness/results/sql_parity_passages.md": "before blend-not-or, not_context, not_mention; rerun bench/correctness/sql_parity.py --passages 4 --size 100000",
    # quality: nDCG@10 and NegRecall@10 under the defaults of their day
    "bench/quality/results/models.md": "family product-max, before the AND texts; rerun bench/quality/models.py (hours: every model and dataset)",
    "bench/quality/results/quality_and_text_2.md": "AND text 2, before not_context and not_mention; rerun bench/quality/quality.py with the AND text at 2 (~65 min)",
}  # fmt: skip


def entry(path: Path) -> str:
    """The key of a results file in INDEPENDENT and STALE: its Markdown file."""
    return str(path.relative_to(ROOT).with_suffix(".md"))


@cache
def cited_results() -> dict[Path, list[str]]:
    """Each results file README.md and docs/ cite (not the studies'), with where it is cited."""
    out: dict[Path, list[str]] = {}
    for doc in DOCS:
        for unit in units(doc):
            for path in unit.cites:
                if STUDIES not in path.parents:
                    out.setdefault(path, []).append(unit.where())
    return out


def test_cited_results_record_what_they_were_measured_with() -> None:
    """Every cited results file carries its provenance: the line the bench writes after a
    Markdown file's title, the key ``provenance`` of a JSON object (a JSON list: its Markdown's)."""
    missing = [
        f"{p.relative_to(ROOT)} (cited at {where[0]})"
        for p, where in sorted(cited_results().items())
        if provenance.read(p) is None
    ]
    assert not missing, (
        "results without their commit and engine defaults (rerun the script that writes them, "
        "or `python bench/lib/provenance.py backfill FILE` for one measured before the line "
        "existed):\n" + "\n".join(missing)
    )


def test_cited_results_were_measured_under_todays_defaults() -> None:
    """A cited result that depends on the engine's defaults was measured under today's. After a
    change of the defaults, rerun what it measured (bench/README.md: which script writes which
    file) and update the numbers the docs quote; or say why it does not depend on them
    (INDEPENDENT), or list it as a debt (STALE)."""
    today = fingerprint()
    wrong = []
    for path, where in sorted(cited_results().items()):
        prov = provenance.read(path)
        if prov is None or entry(path) in INDEPENDENT or entry(path) in STALE:
            continue
        if prov.defaults != today:
            wrong.append(
                f"{path.relative_to(ROOT)}: measured at {prov.commit} with engine defaults "
                f"{prov.defaults}, today's are {today}; cited at {', '.join(where[:3])}"
            )
    assert not wrong, "results measured under other engine defaults:\n" + "\n".join(wrong)


def test_the_lists_of_exceptions_are_current() -> None:
    """Each entry names a results file the docs cite, in one list only; a STALE entry whose file
    was measured again under today's defaults goes."""
    cited = {entry(p) for p in cited_results()}
    assert not set(INDEPENDENT) & set(STALE), set(INDEPENDENT) & set(STALE)
    for key in [*INDEPENDENT, *STALE]:
        assert (ROOT / key).is_file(), f"{key}: no such file"
        assert key in cited, f"{key}: no page of README.md or docs/ cites it: drop the entry"
    today = fingerprint()
    current = [
        key
        for key in STALE
        for path in [ROOT / key, (ROOT / key).with_suffix(".json")]
        if path.is_file()
        and path in cited_results()
        and (prov := provenance.read(path)) is not None
        and prov.defaults == today
    ]
    assert not current, f"measured under today's defaults now: drop them from STALE: {current}"


def test_the_provenance_the_bench_writes_parses_back(tmp_path: Path) -> None:
    """``write_results`` (bench/lib/benchlib.py) records this run's commit and defaults in both
    files, a committed JSON rendered again keeps its own, and the line is no measurement."""
    from bench.lib.benchlib import write_results

    jp, mp = write_results("run", {"rows": [17.5]}, "# A run\n\n| x |\n|---|\n| 17.5 |\n",
                           results_dir=tmp_path)  # fmt: skip
    now = provenance.current()
    assert now.defaults == fingerprint() == provenance.fingerprint_of(provenance.today())
    assert provenance.read(mp) == provenance.read(jp) == now
    lines = mp.read_text().splitlines()
    assert lines[:4] == ["# A run", "", now.line(), ""]
    assert file_numbers(mp).values == file_numbers(jp).values == {Decimal("17.5")}

    earlier = provenance.Provenance("0123abc+dirty", "unknown")
    saved = json.loads(jp.read_text()) | {"provenance": earlier.as_json()}
    write_results("run", saved, "# A run\n\n| 17.5 |\n", results_dir=tmp_path)  # --render
    assert provenance.read(mp) == provenance.read(jp) == earlier
    assert provenance.parse(provenance.stamp(mp.read_text(), now)) == now  # replaced, not added
    assert mp.read_text().count("Measured at commit") == 1
    for style in ({"indent": 1}, {"separators": (",", ":")}, {"indent": 2, "ensure_ascii": False}):
        text = json.dumps({"rows": [1, "é"]}, **style) + "\n"
        stamped = provenance.stamp_json(text, earlier)
        assert json.loads(stamped) == {"provenance": earlier.as_json(), "rows": [1, "é"]}
        assert provenance.stamp_json(stamped, earlier) == stamped


# -- the rules, on made-up text ----------------------------------------------------------------------


def _unit(text: str) -> Unit:
    return Unit(ROOT / "README.md", 1, "paragraph", text)


def _tokens(text: str) -> list[str]:
    return [q.token for q in quotes(_unit(text))]


def test_what_counts_as_a_measurement() -> None:
    assert _tokens("recall@10 is 0.96–1.00 (NOT 2: 0.84)") == ["0.96", "1.00", "0.84"]
    assert _tokens("34,600 rows/s, 11.2k rows/s, 4.9× faster, 82% / 81% fewer") == [
        "34,600",
        "11.2k",
        "4.9×",
        "82%",
        "81%",
    ]
    assert _tokens("p 3.7e-6, p = 0.005, recall@10 ≥ 0.98, within 0.4 s") == [
        "3.7e-6",
        "0.005",
        "0.98",
        "0.4",
    ]
    not_measured = (
        "PostgreSQL 17.9, pgvector 0.8.2, Python 3.12 (Faltings et al., 2025) on 2026-11-27 "
        "at 13:43; all-MiniLM-L6-v2, Reuters-21578, arXiv 0704, a 1.5B model, nDCG@10, p50; "
        "1,000,000 384-d vectors on a 2-core CPU, HNSW m = 16, ef_construction = 128, k = 10, "
        "γ 6, c 0.4, top 10, (pool_size, default 4), p < 0.01, scores within 1e-9; AND 3, "
        "OR 8 over 3 terms and 2 shards, 13 shapes; migration 0013; `--per-template 50`, "
        "[x](scale_1m.md#3)"
    )
    assert _tokens(not_measured) == ["1,000,000"]


def test_a_number_matches_its_roundings_only() -> None:
    def numbers(text: str) -> Numbers:
        found_ = [(abs(v), kind) for v, kind in _text_numbers(text)]
        return Numbers(
            frozenset(v for v, _ in found_),
            frozenset(v for v, k in found_ if k == "%"),
            frozenset(v for v, k in found_ if k == "ratio"),
            frozenset(v for v, k in found_ if k == "s"),
        )

    def holds(doc: str, file: str) -> bool:
        [quote] = quotes(_unit(doc))
        return found(quote, numbers(file))

    assert holds("0.96", "| 0.960 |") and holds("0.96", "0.9612") and not holds("0.96", "0.97")
    assert holds("34,600 rows/s", "| 34600 |") and not holds("11.2k rows/s", "| 34600 |")
    assert holds("11.2k rows/s", "| 11232 |")
    assert holds("82% fewer", "82.0%") and holds("82% fewer", "ratio 0.18")
    assert holds("83% of it", "| 0.83 |") and not holds("82% fewer", "0.821, 0.179, 0.5")
    assert not holds("78% fewer", "| 0.025 | 0.140 | 82% |")
    assert holds("2.9 s", "| 2,860 |") and holds("13 ms", "0.013 s") and not holds("13 ms", "0.013")
    assert holds("p 3.7e-6", "3.7e-06") and not holds("p 3.7e-6", "2.4e-06")
