"""``pglogic eval DATASET``: retrieval quality of every method on a labelled dataset directory.

Registered on the main ``pglogic`` group by the import at the end of :mod:`pglogic.cli`.

Example:
    $ pglogic eval ../shared/data/limit_small
    $ pglogic eval ../shared/data/reuters21578 --out bench/quality/reuters21578
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import click
from rich.progress import Progress

from pglogic.cli import _api, cli, console, example, progress_bar
from pglogic.config import DEFAULT_MODEL
from pglogic.derive import PER_TEMPLATE, SEED, derive_queries
from pglogic.evaldata import load_dataset
from pglogic.evaluate import DENSE, HEADLINE, calibrate_dataset, default_families, evaluate_dataset
from pglogic.operators import resolve_family, resolve_truth
from pglogic.report import targets, write_report


def _task(bar: Progress, description: str, total: int | None = None) -> Callable[[int, int], None]:
    """A progress task and the ``(done, total)`` callback that moves it."""
    task = bar.add_task(description, total=total)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return update


@cli.command(
    "eval",
    epilog=example(
        "pglogic eval ../shared/data/limit_small",
        "pglogic eval ../shared/data/reuters21578 --out bench/quality/reuters21578",
        "pglogic eval mydata --family itlr --family godel --per-template 5 --no-plots",
        "pglogic eval ../shared/data/arxiv_0704 --truth sigmoid:0.186:18.8",
    ),
)
@click.argument(
    "dataset", type=click.Path(path_type=Path, exists=True, file_okay=False, dir_okay=True)
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    help="Directory for results.md, results.json and the plots [default: eval-DATASET].",
)
@click.option("--model", default=DEFAULT_MODEL, show_default=True, help="Embedding model.")
@click.option("--corpus", "corpus_name", help="Corpus to load the documents into [eval_DATASET].")
@click.option(
    "--family",
    "families",
    multiple=True,
    help="Operator family for the engine (repeatable; a preset or and=..,or=..,not=..) "
    "[default: ITLR's 12 combinations and the presets].",
)
@click.option(
    "--per-template",
    type=click.IntRange(min=0),
    default=PER_TEMPLATE,
    show_default=True,
    help="Derived formulas per template.",
)
@click.option(
    "--max-given", type=click.IntRange(min=0), help="Use at most N of the dataset's own queries."
)
@click.option(
    "--names",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help='JSON file {"label": "term text"} overriding the term text of labels.',
)
@click.option("--seed", type=int, default=SEED, show_default=True, help="Sampling seed.")
@click.option(
    "--truth",
    default="clamp",
    show_default=True,
    help="The engine's similarity-to-truth map: clamp, affine or sigmoid:TAU:LAMBDA "
    "(from 'pglogic calibrate').",
)
@click.option("--no-plots", is_flag=True, help="Skip the PNG plots.")
@click.pass_context
def eval_cmd(
    ctx: click.Context,
    dataset: Path,
    out: Path | None,
    model: str,
    corpus_name: str | None,
    families: tuple[str, ...],
    per_template: int,
    max_given: int | None,
    names: Path | None,
    seed: int,
    truth: str,
    no_plots: bool,
) -> None:
    """Compare pglogic with dense retrieval and the baselines on DATASET's labels.

    DATASET is a directory with corpus.jsonl[.gz] (id, text, labels), and optionally
    labels.json (label names) and queries.jsonl (text, logical, relevant, negatives). Logical
    queries with exact ground truth are derived from the labels; every method runs in Postgres;
    nDCG@10, MRR@10, mAP@100, Recall@100 and NegRecall@10 are reported per template, number of
    negations and number of terms, with Wilcoxon tests against dense retrieval.
    """
    resolve_truth(truth)  # fail before loading anything
    fams = list({(f := resolve_family(spec)).spec: f for spec in families}.values())
    fams = fams or default_families()
    ds = load_dataset(dataset, names=names)
    derived = derive_queries(ds, per_template=per_template, seed=seed, max_given=max_given)
    if not derived.queries:
        raise click.ClickException(f"No query could be derived from {dataset}")
    api = _api(ctx)
    with progress_bar() as bar:
        on_ingest = _task(bar, f"load {ds.name}")
        on_query = _task(bar, "queries", len(derived.queries))

        result = evaluate_dataset(
            api,
            ds,
            model=model,
            corpus_name=corpus_name,
            derived=derived,
            families=fams,
            on_ingest=on_ingest,
            on_query=on_query,
            truth=truth,
        )
    out_dir = out or Path(f"eval-{ds.name}")
    paths = write_report(result, out_dir, plots=not no_plots)
    s = result.summary
    console.print(
        f"{len(result.queries)} queries on {len(ds.doc_ids):,} documents in {result.seconds:.0f}s."
        f" nDCG@10: {DENSE} {s[DENSE]['ndcg@10']:.3f}, {HEADLINE} {s[HEADLINE]['ndcg@10']:.3f}"
        if HEADLINE in s
        else f"{len(result.queries)} queries in {result.seconds:.0f}s."
    )
    for name, check in targets(result).items():
        console.print(f"  {'met   ' if check['met'] else 'MISSED'} {name}")
    console.print("Wrote " + ", ".join(str(p) for p in paths))


@cli.command(
    "calibrate",
    epilog=example(
        "pglogic calibrate ../shared/data/reuters21578",
        "pglogic calibrate mydata --unsupervised --json",
    ),
)
@click.argument(
    "dataset", type=click.Path(path_type=Path, exists=True, file_okay=False, dir_okay=True)
)
@click.option("--model", default=DEFAULT_MODEL, show_default=True, help="Embedding model.")
@click.option("--corpus", "corpus_name", help="Corpus to load the documents into [eval_DATASET].")
@click.option(
    "--names",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help='JSON file {"label": "term text"} overriding the term text of labels.',
)
@click.option(
    "--unsupervised",
    is_flag=True,
    help="Ignore which documents carry which label: fit from the similarity distribution.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the parameters as JSON.")
@click.pass_context
def calibrate_cmd(
    ctx: click.Context,
    dataset: Path,
    model: str,
    corpus_name: str | None,
    names: Path | None,
    unsupervised: bool,
    as_json: bool,
) -> None:
    """Fit ITLR's calibrated truth map sigma((s - tau) * lambda) for a model on DATASET.

    Each label's name is a query term; documents that carry the label are relevant, ten times
    as many that do not are not; a class-balanced logistic regression of relevance on cosine
    similarity gives tau (similarity at truth 0.5) and lambda. Use the printed spec with
    --truth on search, compile and eval. The parameters are not stored in the database yet.
    """
    ds = load_dataset(dataset, names=names)
    api = _api(ctx)
    with progress_bar() as bar:
        on_ingest = _task(bar, f"load {ds.name}")
        cal = calibrate_dataset(
            api,
            ds,
            model=model,
            corpus_name=corpus_name,
            unsupervised=unsupervised,
            on_ingest=on_ingest,
        )
    spec = f"sigmoid:{cal.tau:.4g}:{cal.lam:.4g}"
    if as_json:
        click.echo(json.dumps({**cal.to_dict(), "model": model, "truth": spec}))
        return
    auc = "" if cal.auc is None else f", AUC {cal.auc:.3f} over {cal.n_pairs:,} pairs"
    console.print(
        f"{model} on {ds.name} ({cal.method}{auc}): tau = {cal.tau:.4f}, lambda = {cal.lam:.2f}"
    )
    console.print(f"Use: --truth {spec}")
