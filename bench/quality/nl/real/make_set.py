"""How ``bench/quality/nl/real/questions.jsonl`` was made (kept to show its provenance; run once).

1. ``candidates``: 215 real question titles from the shared Stack Exchange corpus, sampled with a
   fixed seed in four strata: titles with an exclusion cue ("without", "except", "other than",
   "instead of", "-free", ...), with another negation word ("not", "n't", "no", "never"), with
   "or", and with none of these.
2. Gold formulas were written from the question alone, by the rules of ``LABELLING.md``, before
   any rewrite of the new prompt, grammar or checks was run: the 215 titles in two batches, 20
   questions derived from real arXiv titles ("papers on X but not Y"), 25 questions in other
   domains, and the 10 examples quoted in issue 43.
3. ``split``: each question is put in ``dev`` or ``test`` by a seeded draw within its stratum (origin
   x gold shape x negation kind), half and half; the issue's examples are all ``dev`` (they were
   seen while the checks were designed). The test half is frozen in the commit that adds it and
   run only at the end.

    python bench/quality/nl/real/make_set.py candidates > candidates.jsonl
    python bench/quality/nl/real/make_set.py split labelled1.jsonl labelled2.jsonl ... > questions.jsonl
"""

from __future__ import annotations

import gzip
import json
import random
import re
import sys
from collections import defaultdict
from pathlib import Path

SHARED = Path(__file__).resolve().parents[5] / "shared" / "data"
EXCLUSION = re.compile(
    r"\b(without|except|excluding|other than|apart from|besides|aside from|but not|neither|"
    r"instead of|rather than|free of|\w+-free|non-\w+|avoid\w*)\b",
    re.I,
)
NEGATION = re.compile(r"\b(not|no|never|cannot)\b|n't\b|n’t\b", re.I)
OR = re.compile(r"\bor\b", re.I)
STRATA = {"exclusion-cue": 75, "negation-word": 55, "or": 55, "none": 30}


def candidates() -> list[dict[str, str]]:
    path = SHARED / "stackexchange_cooking_robotics" / "corpus.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        docs = [json.loads(line) for line in fh]
    rng = random.Random(43)
    pools: dict[str, list[dict[str, str]]] = {k: [] for k in STRATA}
    for d in docs:
        t = " ".join(d["title"].split())
        key = (
            "exclusion-cue" if EXCLUSION.search(t)
            else "negation-word" if NEGATION.search(t)
            else "or" if OR.search(t)
            else "none"
        )  # fmt: skip
        pools[key].append(d)
    out = []
    for key, n in STRATA.items():
        for d in rng.sample(pools[key], n):
            out.append({"id": d["id"], "source": f"stackexchange:{d['id']}", "stratum": key,
                        "question": " ".join(d["title"].split())})  # fmt: skip
    rng.shuffle(out)
    return out


def shape(gold: str) -> str:
    if gold == "plain":
        return "plain"
    return "NOT" if "NOT" in gold else "OR" if "OR" in gold else "AND"


def split(files: list[str]) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    for f in files:
        for line in Path(f).read_text().splitlines():
            r = json.loads(line)
            if r["source"].startswith("stackexchange") and r["source"] in seen:  # drawn twice
                continue
            seen.add(r["source"])
            rows.append(r)
    strata: dict[tuple[str, str, str], list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        origin = r["source"].split(":")[0]
        strata[(origin, shape(r["gold"]), r["negation"])].append(r)
    rng = random.Random(4343)
    for key in sorted(strata):
        group = strata[key]
        if key[0] == "issue-43":
            for r in group:
                r["split"] = "dev"
            continue
        rng.shuffle(group)
        first = rng.choice(("dev", "test"))
        for i, r in enumerate(group):
            r["split"] = first if i % 2 == 0 else ("test" if first == "dev" else "dev")
    order = {"se": 0, "ax": 1, "ow": 2, "is": 3}
    return sorted(rows, key=lambda r: (order.get(r["id"][:2], 0), r["id"]))


if __name__ == "__main__":
    if sys.argv[1] == "candidates":
        for row in candidates():
            print(json.dumps(row, ensure_ascii=False))
    else:
        for row in split(sys.argv[2:]):
            print(json.dumps(row, ensure_ascii=False))
