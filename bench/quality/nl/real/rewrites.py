"""Rewrite accuracy on questions nobody here tuned on: ``bench/quality/nl/real/questions.jsonl``.

269 questions (216 real Stack Exchange titles, 20 from arXiv titles, 25 written, 8 quoted in issue
43) with gold formulas written by ``LABELLING.md``, split dev / test before the prompt, grammar and
checks changed (``make_set.py``). Each question is rewritten once by the model behind
``PGLOGIC_LLM_BASE_URL`` / ``PGLOGIC_LLM_MODEL`` (the local model of ``pglogic llm serve``) and
read twice from that one answer: as the model wrote it (checks off) and after the checks of
:mod:`pglogic.llm.wording`. Judged by :func:`pglogic.eval.rewrites.judge_rewrite`.

Answers are cached in ``llm_cache.jsonl`` (model + messages -> text, seconds), so a rerun asks
only for what is new and reports the measured latency. ``--label`` names a run in
``results.json``; ``results.md`` shows every run kept there, and ``answers.jsonl`` keeps the
answers of the run labelled ``current`` for the property test (tests/test_nl_real.py).

    .venv/bin/python bench/quality/nl/real/rewrites.py --split dev --label current
    .venv/bin/python bench/quality/nl/real/rewrites.py --split test --label current   # once, at the end
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the repository root: bench.lib
from bench.lib import provenance
from bench.lib.benchlib import host, md_table, percentile
from bench.lib.llm_cache import DiskCachedChat
from pglogic.eval.nl import TimingChat
from pglogic.eval.rewrites import ERROR_KINDS, Gold, judge_rewrite
from pglogic.llm.client import LLMConfig, get_client
from pglogic.llm.rewrite import rewrite

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "questions.jsonl"
RESULTS = HERE / "results.json"
ANSWERS = HERE / "answers.jsonl"
VARIANTS = ("model", "checked")


def load(split: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    return [r for r in rows if split == "all" or r["split"] == split]


def judged(tree: Any, row: dict[str, Any]) -> dict[str, Any]:
    gold = Gold.read(row["gold"], row.get("alts", ()), row["negation"])
    j = judge_rewrite(tree, gold, row["question"])
    return {"exact": j.exact, "equivalent": j.equivalent, "structural": j.structural,
            "errors": list(j.errors)}  # fmt: skip


def run(rows: Sequence[dict[str, Any]], chat: Any) -> list[dict[str, Any]]:
    out = []
    t0 = time.perf_counter()
    for i, row in enumerate(rows):
        seconds: list[float] = []
        checked = rewrite(row["question"], TimingChat(chat, seconds), cache=None, checks=True)
        model = rewrite(row["question"], chat, cache=None, checks=False)  # the same answer, cached
        out.append(
            {
                "id": row["id"], "split": row["split"], "source": row["source"],
                "question": row["question"], "gold": row["gold"], "alts": row.get("alts", []),
                "negation": row["negation"], "answers": list(checked.answers),
                "output": checked.output, "model_query": model.query, "query": checked.query,
                "repairs": list(checked.repairs), "fallback": checked.fallback,
                "seconds": round(sum(seconds), 3),
                "model": judged(None if model.fallback else model.tree, row),
                "checked": judged(None if checked.fallback else checked.tree, row),
            }
        )  # fmt: skip
        if (i + 1) % 10 == 0 or i + 1 == len(rows):
            print(f"  {i + 1}/{len(rows)} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return out


def summary(items: Sequence[dict[str, Any]], variant: str) -> dict[str, Any]:
    n = max(1, len(items))
    errs: Counter[str] = Counter()
    for it in items:
        errs.update(set(it[variant]["errors"]))
    excl = [it for it in items if it["negation"] == "exclusion"]
    content = [it for it in items if it["negation"] == "content"]
    secs = [it["seconds"] for it in items]
    return {
        "questions": len(items),
        "exact": sum(it[variant]["exact"] for it in items) / n,
        "equivalent": sum(it[variant]["equivalent"] for it in items) / n,
        "structural": sum(it[variant]["structural"] for it in items) / n,
        "errors": {k: errs[k] for k in ERROR_KINDS},
        "exclusions": len(excl),
        "exclusions_kept": sum(
            not {"lost NOT", "inverted NOT"} & set(it[variant]["errors"]) for it in excl
        ),
        "content": len(content),
        "content_with_not": sum("spurious NOT" in it[variant]["errors"] for it in content),
        "repaired": sum(bool(it["repairs"]) for it in items) if variant == "checked" else 0,
        "fallback": sum(it["fallback"] for it in items),
        "p50_s": round(percentile(secs, 50), 2),
        "p95_s": round(percentile(secs, 95), 2),
    }


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def markdown(data: dict[str, Any]) -> str:
    m = data["machine"]
    out = [
        "# Rewrite accuracy on real questions (`bench/quality/nl/real`)",
        "",
        "269 questions: 216 real question titles from the shared Stack Exchange corpus (cooking "
        "and robotics), 20 made from real arXiv titles, 25 written in other domains, 8 quoted in "
        "issue 43; gold formulas by `LABELLING.md`, written from the question alone; split dev / "
        "test before the prompt, grammar and checks changed (`make_set.py`). *model*: the "
        "model's answer as read by the grammar reader; *checked*: after the checks. *exact*: the "
        "gold (or an accepted alternative) with terms compared by content words; a `plain` gold "
        "(no logic) is met by any single term. *structural*: terms aligned to gold terms by "
        "shared content words, then the same truth table. Error columns count questions. "
        f"Machine: {m['cpu_model']}, {m['nproc']} cores. Produced by `bench/quality/nl/real/rewrites.py`.",
        "",
    ]
    rows = []
    for label, run_ in data["runs"].items():
        for split, res in run_["splits"].items():
            for variant in VARIANTS:
                s = res[variant]
                e = s["errors"]
                rows.append([
                    label, split, variant, s["questions"], f"{s['exact']:.3f}",
                    f"{s['equivalent']:.3f}", f"**{s['structural']:.3f}**",
                    f"{s['exclusions_kept']}/{s['exclusions']}", e["lost NOT"],
                    e["inverted NOT"], f"{s['content_with_not']}/{s['content']}",
                    e["OR/AND swap"], e["grouping"], e["filler term"], e["unaligned term"],
                    e["missing term"], s["fallback"], f"{s['p50_s']:.1f} / {s['p95_s']:.1f}",
                ])  # fmt: skip
    out += md_table(
        ["run", "split", "read", "n", "exact", "equivalent", "structural", "NOTs kept",
         "lost NOT", "inverted NOT", "NOT on content negation", "OR/AND swap", "grouping",
         "filler", "unaligned", "missing", "fallback", "rewrite p50 / p95 (s)"], rows,
    ).splitlines()  # fmt: skip
    out.append("")
    for label, run_ in data["runs"].items():
        out += [f"Run `{label}`: commit {run_['commit']}, model {run_['model']}, "
                f"output `{run_['output']}`, {run_['date']}. {run_.get('note', '')}", ""]  # fmt: skip
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--split", choices=("dev", "test", "all"), default="dev")
    ap.add_argument("--label", default="current", help="the run's name in results.json")
    ap.add_argument("--note", default="", help="a remark shown under the table")
    ap.add_argument("--render-only", action="store_true")
    args = ap.parse_args()
    data: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"runs": {}}
    if not args.render_only:  # the runs kept and this one: the file names this one
        data = provenance.record(provenance.fresh(data), provenance.current())
        base = LLMConfig.resolve(timeout=300)
        chat = DiskCachedChat(get_client(base), HERE / "llm_cache.jsonl")
        h = host()
        data["machine"] = {k: h[k] for k in ("cpu_model", "nproc", "mem_total_gib")}
        splits = ("dev", "test") if args.split == "all" else (args.split,)
        run_ = data["runs"].setdefault(args.label, {"splits": {}, "items": {}})
        run_.update(commit=commit(), model=base.model, date=time.strftime("%Y-%m-%d"))
        if args.note:
            run_["note"] = args.note
        for split in splits:
            items = run(load(split), chat)
            run_["output"] = items[0]["output"] if items else ""
            run_["items"][split] = items
            run_["splits"][split] = {v: summary(items, v) for v in VARIANTS}
            print(split, json.dumps(run_["splits"][split]), flush=True)
        RESULTS.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        if args.label == "current":
            every = [it for s in ("dev", "test") for it in run_["items"].get(s, [])]
            lines = [
                json.dumps({k: it[k] for k in ("id", "output", "answers")}, ensure_ascii=False)
                for it in every
            ]
            ANSWERS.write_text("".join(line + "\n" for line in lines))
    md = provenance.stamp(markdown(data), provenance.of(data))
    (HERE / "results.md").write_text(md + "\n")
    print((HERE / "results.md").read_text())


if __name__ == "__main__":
    main()
