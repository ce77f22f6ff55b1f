"""Natural-language questions with a local LLM: rewrite accuracy and ITLR's real-data protocol.

Needs the local model served (``pglogic llm fetch && pglogic llm serve``) or any endpoint in
``PGLOGIC_LLM_BASE_URL`` / ``PGLOGIC_LLM_MODEL``, and the corpora ``eval_<dataset>`` that
``bench/quality/quality.py`` keeps in database ``bench_quality`` (read only here).

Part A (``--part hand``): the hand-written questions of ``bench/quality/nl/questions.jsonl`` are
rewritten and compared with their gold formulas (exact and up to equivalence,
:mod:`pglogic.eval.nl`), with fallback rate and rewrite latency.

Part B (``--part real``): per dataset, ``--not`` label-derived queries with NOT and ``--plain``
without (seeded sample of :func:`pglogic.eval.derive.derive_queries`); the LLM writes each formula as
a question, the formula is discarded, and the question is searched by dense retrieval, a
BRIGHT-style baseline (the LLM's passage about relevant documents, embedded) and pglogic with
the LLM's rewrite; pglogic on the original formula and dense on its text are references.

Every LLM answer is cached in ``bench/quality/nl/llm_cache.jsonl`` (keyed by model and messages, with
the seconds it took), so a rerun only asks for what is new and reports the measured latency.

    .venv/bin/python bench/quality/nl/run.py                 # both parts
    .venv/bin/python bench/quality/nl/run.py --part hand

Results: ``bench/quality/nl/results.{md,json}`` (``heldout/``: the held-out questions;
``real/rewrites.py``: rewrite accuracy on real questions, ``real/results.md``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root: bench.lib
from bench.lib import provenance
from bench.lib.benchlib import SHARED_DATA, host, md_table, percentile
from bench.lib.llm_cache import DiskCachedChat
from pglogic import PgLogic
from pglogic.eval.data import load_dataset
from pglogic.eval.derive import derive_queries
from pglogic.eval.nl import (
    BRIGHT,
    DENSE_GOLD,
    DENSE_Q,
    NL_METHODS,
    PGLOGIC_GOLD,
    PGLOGIC_RW,
    SHAPES,
    NLItem,
    TimingChat,
    evaluate_nl,
    item_json,
    judge,
    sample_queries,
    shape,
    summarise_items,
)
from pglogic.eval.rewrites import Gold, judge_rewrite
from pglogic.llm.client import LLMConfig, get_client
from pglogic.llm.rewrite import rewrite
from pglogic.query import parse

HERE = Path(__file__).resolve().parent
DATASETS = ("reuters21578", "stackexchange_cooking_robotics", "arxiv_0704")
DSN = "postgresql://postgres:@/bench_quality?host=/tmp/plbench/pgdata"
CACHE = HERE / "llm_cache.jsonl"
QUESTIONS = HERE / "questions.jsonl"
#: How results.md describes a question set.
DESCRIBED = {
    "questions.jsonl": (
        "(`bench/quality/nl/questions.jsonl`: the 47 original ones on news, cooking, robotics, science, "
        "health and travel, and 70 new ones on law, sports, software, finance, medicine, history, "
        "travel, music and more, with NOT, OR, either/or, neither/nor, mixed precedence and "
        "questions that need no logic). "
    ),
    "heldout.jsonl": (
        "(`bench/quality/nl/heldout.jsonl`: 30 questions in 29 domains that questions.jsonl does not "
        "cover, with the same mix of shapes, written after the prompt and the checks were frozen "
        "and never tuned on). "
    ),
}


def client_for(base: LLMConfig, max_tokens: int) -> DiskCachedChat:
    cfg = LLMConfig(
        base.base_url,
        base.model,
        api_key=base.api_key,
        timeout=base.timeout,
        max_tokens=max_tokens,
        output=base.output,
    )
    return DiskCachedChat(get_client(cfg), CACHE)


def latency(seconds: Sequence[float]) -> dict[str, float]:
    return {
        "p50_s": round(percentile(seconds, 50), 3),
        "p95_s": round(percentile(seconds, 95), 3),
        "mean_s": round(sum(seconds) / len(seconds), 3) if seconds else float("nan"),
    }


def progress(label: str) -> Any:
    t0 = time.perf_counter()

    def report(done: int, total: int) -> None:
        if done % 10 == 0 or done == total:
            print(f"  {label}: {done}/{total} ({time.perf_counter() - t0:.0f} s)", flush=True)

    return report


def stage_progress(dataset: str) -> Any:
    """The ``on_stage`` callback of :func:`evaluate_nl`: a progress line per stage."""
    return lambda stage: progress(f"{dataset} {stage}")


# -- part A -------------------------------------------------------------------------------------


def hand_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy, fallback and retry rates and latency of some part-A rows."""
    n = max(1, len(rows))
    return {
        "questions": len(rows),
        "exact": sum(r["exact"] for r in rows) / n,
        "equivalent": sum(r["equivalent"] for r in rows) / n,
        "lenient": sum(r["lenient"] for r in rows) / n,
        "structural": sum(r.get("structural", False) for r in rows) / n,
        "fallback_rate": sum(r["fallback"] for r in rows) / n,
        "retry_rate": sum(r["attempts"] > 1 for r in rows) / n,
        "repaired_rate": sum(bool(r.get("repairs")) for r in rows) / n,
        "latency": latency([r["seconds"] for r in rows]),
    }


def question_set(qid: str) -> str:
    """The set a question belongs to, by its id: original (h..), new (n..) or held-out (x..)."""
    return {"n": "new", "x": "held-out"}.get(qid[:1], "original")


def part_hand(base: LLMConfig, checks: bool = True, questions: Path = QUESTIONS) -> dict[str, Any]:
    rows = [json.loads(line) for line in questions.read_text().splitlines() if line.strip()]
    client = client_for(base, 256)
    out = []
    report = progress("hand-written rewrites")
    for i, row in enumerate(rows):
        seconds: list[float] = []
        timing = TimingChat(client, seconds)
        rw = rewrite(row["question"], timing, cache=None, checks=checks)
        gold = parse(row["gold"])
        acc = judge(None if rw.fallback else rw.tree, gold)
        struct = judge_rewrite(
            None if rw.fallback else rw.tree, Gold.read(row["gold"]), row["question"]
        )
        out.append(
            {
                **row,
                "set": question_set(row["id"]),
                "shape": shape(gold, row["question"]),
                "rewrite": rw.query,
                "answer": rw.answers[-1] if rw.answers else "",
                "output": rw.output,
                "repairs": list(rw.repairs),
                "fallback": rw.fallback,
                "attempts": len(seconds),
                "seconds": round(sum(seconds), 3),
                "exact": acc.exact,
                "equivalent": acc.equivalent,
                "lenient": acc.lenient,
                "structural": struct.structural,
                "errors": list(struct.errors),
            }
        )
        report(i + 1, len(rows))
    groups: dict[str, dict[str, Any]] = {}
    for key, values in (("set", ("original", "new", "held-out")), ("shape", SHAPES)):
        for value in values:
            sub = [r for r in out if r[key] == value]
            if sub:
                groups[f"{key}:{value}"] = hand_summary(sub)
    by_topic: dict[str, dict[str, float]] = {}
    for topic in sorted({r["topic"] for r in out}):
        sub = [r for r in out if r["topic"] == topic]
        by_topic[topic] = {
            "questions": len(sub),
            "exact": sum(r["exact"] for r in sub) / len(sub),
            "equivalent": sum(r["equivalent"] for r in sub) / len(sub),
        }
    return {
        "summary": hand_summary(out),
        "output": out[0]["output"] if out else "",
        "checks": checks,
        "described": DESCRIBED.get(questions.name, f"(`{questions.name}`). "),
        "groups": groups,
        "by_topic": by_topic,
        "items": out,
    }


# -- part B -------------------------------------------------------------------------------------


def part_real(base: LLMConfig, args: argparse.Namespace) -> dict[str, Any]:
    api = PgLogic(args.dsn)
    q_client = client_for(base, 96)
    rw_client = client_for(base, 256)
    r_client = client_for(base, args.reasoning_tokens)
    results: dict[str, Any] = {}
    items_out: list[dict[str, Any]] = []
    all_items: list[NLItem] = []
    all_scores: dict[str, dict[str, dict[str, float]]] = {m: {} for m in NL_METHODS}
    keys: list[str] = []
    for name in args.datasets:
        ds = load_dataset(SHARED_DATA / name)
        chosen = sample_queries(derive_queries(ds).queries, args.n_not, args.n_plain, args.seed)
        print(f"{name}: {len(chosen)} queries", flush=True)
        items, per_query = evaluate_nl(
            api, ds, chosen, question_client=q_client, rewrite_client=rw_client,
            reasoning_client=r_client, corpus_name=f"eval_{name}",
            on_stage=stage_progress(name),
        )  # fmt: skip
        results[name] = summarise_items(items, per_query)
        print(f"{name}: nDCG@10 {json.dumps(results[name]['ndcg@10'])}", flush=True)
        print(f"{name}: rewrite {json.dumps(results[name]['rewrite'])}", flush=True)
        items_out += [{"dataset": name, **item_json(i)} for i in items]
        for m in NL_METHODS:
            all_scores[m].update({f"{name}/{q}": v for q, v in per_query[m].items()})
        keys += [f"{name}/{i.id}" for i in items]
        all_items += items
    results["all"] = summarise_items(all_items, all_scores, keys)
    results["llm_calls"] = {
        "new": q_client.calls + rw_client.calls + r_client.calls,
        "cached": q_client.hits + rw_client.hits + r_client.hits,
    }
    return {"results": results, "items": items_out}


# -- report -------------------------------------------------------------------------------------


def fmt(x: float) -> str:
    return "—" if x != x else f"{x:.3f}"


def markdown(data: dict[str, Any]) -> str:
    m = data["machine"]
    out = [
        "# Natural-language questions with a local LLM",
        "",
        f"Model {data['llm']['model']} ({data['llm']['note']}) served by `pglogic llm serve`, "
        f"temperature 0. Machine: {m['cpu_model']}, {m['nproc']} cores. Embeddings "
        "all-MiniLM-L6-v2; top 100 per query; NegRecall@10: lower is better. Produced by "
        "`bench/quality/nl/run.py`; per-question details in `results.json`.",
        "",
    ]
    if data.get("note"):
        out += [f"Note: {data['note']}", ""]
    if "hand" in data:
        hand = data["hand"]
        h = hand["summary"]
        out += [
            "## A. Rewrite accuracy on hand-written questions",
            "",
            f"{h['questions']} questions with gold formulas "
            + hand.get(
                "described",
                "(`bench/quality/nl/questions.jsonl`: the 47 original ones on news, cooking, robotics, "
                "science, health and travel, and 70 new ones on law, sports, software, finance, "
                "medicine, history, travel, music and more, with NOT, OR, either/or, neither/nor, "
                "mixed precedence and questions that need no logic). ",
            )
            + f"Output constrained by `{hand.get('output', 'plain')}`; deterministic checks "
            f"against the question's words {'on' if hand.get('checks', False) else 'off'}. "
            "*Exact*: same canonical query once terms are case-folded and whitespace-normalised; "
            "*equivalent*: same truth table over the gold terms, a rewritten term matching a "
            "gold term only by equal normalised text (an invented or reworded term is wrong); "
            "*lenient*: also when a rewritten term contains exactly one gold term's words; "
            "*structural*: terms aligned to gold terms by shared content words, then the same "
            "truth table (`pglogic.eval.rewrites`); "
            "*repaired*: the checks changed the model's answer.",
            "",
        ]
        rows = [["all", *hand_cells(h)]]
        for name, g in hand.get("groups", {}).items():
            rows.append([name.replace("set:", "").replace("shape:", ""), *hand_cells(g)])
        for name, g in data.get("hand_ablation", {}).items():
            rows.append([f"all, {name}", *hand_cells(g)])
        out += md_table(
            ["questions", "n", "exact", "equivalent", "lenient", "structural", "fallback",
             "retried", "repaired", "latency p50 (s)", "p95 (s)"], rows,
        ).splitlines()  # fmt: skip
        out += ["", "By topic:", ""]
        out += md_table(
            ["topic", "questions", "exact", "equivalent"],
            [[t, v["questions"], fmt(v["exact"]), fmt(v["equivalent"])]
             for t, v in hand["by_topic"].items()],
        ).splitlines()  # fmt: skip
        wrong = [r for r in hand["items"] if not r["equivalent"]]
        if wrong:
            out += ["", f"Rewrites that are not equivalent ({len(wrong)}):", ""]
            out += md_table(
                ["id", "question", "gold", "rewrite"],
                [[r["id"], r["question"], f"`{r['gold']}`", f"`{r['rewrite']}`"] for r in wrong],
            ).splitlines()
        out.append("")
    if "real" in data:
        r = data["real"]["results"]
        cfg = data["real"]["config"]
        out += [
            "## B. ITLR's real-data protocol",
            "",
            f"Per dataset {cfg['n_not']} label-derived queries with NOT and {cfg['n_plain']} "
            f"without (seed {cfg['seed']}, sampled from `derive_queries`). The LLM writes each "
            "formula as a question; the formula is then discarded. Methods on the question: "
            f"`{DENSE_Q}`; `{BRIGHT}` (the LLM writes a short passage on what relevant documents "
            f"contain, at most {cfg['reasoning_tokens']} tokens; the passage is embedded); "
            f"`{PGLOGIC_RW}` (the LLM's logical query, default engine). References that see the "
            f"formula: `{PGLOGIC_GOLD}` and `{DENSE_GOLD}`.",
            "",
        ]
        for metric in ("ndcg@10", "negrecall@10"):
            out += [f"### {metric}", ""]
            rows = []
            for ds in [*DATASETS_DONE(r), "all"]:
                res = r[ds]
                rows.append([ds, "all", res["queries"], *(fmt(res[metric][m]) for m in NL_METHODS)])
                for b, v in res["by_negations"].items():
                    rows.append([ds, f"{b} NOT", v["queries"],
                                 *(fmt(v[metric][m]) for m in NL_METHODS)])  # fmt: skip
            out += md_table(["dataset", "negations", "queries", *NL_METHODS], rows).splitlines()
            out.append("")
        out += ["### pglogic(rewrite) against the question baselines (nDCG@10, Wilcoxon)", ""]
        rows = []
        for ds in [*DATASETS_DONE(r), "all"]:
            for k, v in r[ds]["wilcoxon_ndcg@10"].items():
                rows.append([ds, k, f"{v['delta']:+.3f}", f"{v['p']:.2g}", v["n"]])
        out += md_table(["dataset", "comparison", "Δ nDCG@10", "p", "n"], rows).splitlines()
        out += ["", "### Rewrite accuracy against the original formula, and LLM latency", ""]
        rows = []
        for ds in [*DATASETS_DONE(r), "all"]:
            w = r[ds]["rewrite"]
            rows.append([
                ds, fmt(w["exact"]), fmt(w["equivalent"]), fmt(w["lenient"]),
                fmt(w["fallback_rate"]), f"{w['latency']['p50_s']:.2f}",
                f"{w['latency']['p95_s']:.2f}", f"{r[ds]['question_latency']['p50_s']:.2f}",
                f"{r[ds]['reasoning_latency']['p50_s']:.2f}",
            ])  # fmt: skip
        out += md_table(
            ["dataset", "exact", "equivalent", "lenient", "fallback", "rewrite p50 (s)",
             "rewrite p95 (s)", "question p50 (s)", "reasoning p50 (s)"], rows,
        ).splitlines()  # fmt: skip
        out.append("")
    return "\n".join(out)


def hand_cells(h: dict[str, Any]) -> list[Any]:
    return [
        h["questions"], fmt(h["exact"]), fmt(h["equivalent"]), fmt(h["lenient"]),
        fmt(h.get("structural", float("nan"))), fmt(h["fallback_rate"]), fmt(h["retry_rate"]), fmt(h.get("repaired_rate", 0.0)),
        f"{h['latency']['p50_s']:.2f}", f"{h['latency']['p95_s']:.2f}",
    ]  # fmt: skip


def DATASETS_DONE(r: dict[str, Any]) -> list[str]:
    return [d for d in DATASETS if d in r]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--part", choices=("hand", "real", "all"), default="all")
    ap.add_argument("--dsn", default=DSN)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--not", dest="n_not", type=int, default=20)
    ap.add_argument("--plain", dest="n_plain", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reasoning-tokens", type=int, default=96)
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--questions", type=Path, default=QUESTIONS, help="part A's questions (JSONL)")
    ap.add_argument("--note", default=None, help="a remark on the run, shown in results.md")
    ap.add_argument(
        "--ablation",
        action="store_true",
        help="part A also without the checks, and without any output constraint",
    )
    ap.add_argument(
        "--render-only", action="store_true", help="rewrite results.md from results.json"
    )
    args = ap.parse_args()
    if args.render_only:
        saved: dict[str, Any] = json.loads((args.out / "results.json").read_text())
        if args.note:
            saved["note"] = args.note
            (args.out / "results.json").write_text(json.dumps(saved, indent=1) + "\n")
        md = provenance.stamp(markdown(saved), provenance.of(saved))  # the run's, kept
        (args.out / "results.md").write_text(md + "\n")
        print((args.out / "results.md").read_text())
        return
    base = LLMConfig.resolve(timeout=300)
    t0 = time.perf_counter()
    h = host()
    data: dict[str, Any] = {
        "llm": {
            "model": base.model,
            "base_url": base.base_url,
            "note": "Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF, llama-cpp-python, CPU",
        },
        "machine": {k: h[k] for k in ("cpu_model", "nproc", "mem_total_gib")},
    }
    previous = args.out / "results.json"
    if previous.exists():  # keep the other part's results when only one part runs
        old = json.loads(previous.read_text())
        for part in ("hand", "real"):
            if part in old:
                data[part] = old[part]
    if args.note:
        data["note"] = args.note
    if args.part in ("hand", "all"):
        data["hand"] = part_hand(base, questions=args.questions)
        print(json.dumps(data["hand"]["summary"]), flush=True)
        if args.ablation:
            no_checks = part_hand(base, checks=False, questions=args.questions)
            ablation = {f"{no_checks['output']}, no checks": no_checks["summary"]}
            plain = replace(base, output="plain")
            for checks in (True, False):
                res = part_hand(plain, checks=checks, questions=args.questions)
                ablation[f"plain, {'checks' if checks else 'no checks'}"] = res["summary"]
            data["hand_ablation"] = ablation
            print(json.dumps(ablation), flush=True)
    if args.part in ("real", "all"):
        real = part_real(base, args)
        real["config"] = {
            "datasets": args.datasets, "n_not": args.n_not, "n_plain": args.n_plain,
            "seed": args.seed, "reasoning_tokens": args.reasoning_tokens,
        }  # fmt: skip
        data["real"] = real
    data["seconds_this_run"] = round(time.perf_counter() - t0, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    prov = provenance.current()
    data = provenance.record(data, prov)
    (args.out / "results.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    (args.out / "results.md").write_text(provenance.stamp(markdown(data), prov) + "\n")
    print((args.out / "results.md").read_text())


if __name__ == "__main__":
    main()
