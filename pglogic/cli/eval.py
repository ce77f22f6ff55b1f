"""``pglogic eval DATASET``: retrieval quality of every method on a labelled dataset directory;
``pglogic calibrate`` and ``pglogic calibration list|delete``: calibrated truth maps.

Registered on the main ``pglogic`` group by the import at the end of :mod:`pglogic.cli`.

Example:
    $ pglogic eval ../shared/data/limit_small
    $ pglogic eval ../shared/data/reuters21578 --out bench/quality/reuters21578
    $ pglogic calibrate ../shared/data/reuters21578 --save
    $ pglogic calibration list
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from pglogic.cli import ui
from pglogic.cli.ui import console, example, progress_bar
from pglogic.config import DEFAULT_MODEL
from pglogic.engine.operators import resolve_family, resolve_truth
from pglogic.errors import InvalidInput
from pglogic.eval.calibrate_corpus import fit_from_corpus, read_terms
from pglogic.eval.data import load_dataset
from pglogic.eval.derive import PER_TEMPLATE, SEED, derive_queries
from pglogic.eval.evaluate import (
    DENSE,
    EVAL_MODES,
    HEADLINE,
    calibrate_dataset,
    default_families,
    evaluate_dataset,
)
from pglogic.eval.report import targets, write_report
from pglogic.llm.client import LLMConfig
from pglogic.store.calibration_store import (
    check_target,
    delete_calibration,
    list_calibrations,
    save_calibration,
    truth_spec,
)

if TYPE_CHECKING:  # annotations only
    from pglogic.engine.calibration import Calibration
    from pglogic.engine.operators import OperatorFamily
    from pglogic.eval.data import Dataset
    from pglogic.eval.derive import Derived
    from pglogic.eval.evaluate import EvalResult


def _task(bar: Progress, description: str, total: int | None = None) -> Callable[[int, int], None]:
    """A progress task and the ``(done, total)`` callback that moves it."""
    task = bar.add_task(description, total=total)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return update


@click.command(
    "eval",
    epilog=example(
        "pglogic eval ../shared/data/limit_small",
        "pglogic eval ../shared/data/reuters21578 --out bench/quality/reuters21578",
        "pglogic eval mydata --family itlr --family godel --per-template 5 --no-plots",
        "pglogic eval ../shared/data/arxiv_0704 --truth sigmoid:0.186:18.8",
        "pglogic eval ../shared/data/reuters21578 --mode nsfl --mode sqo --family product-max",
        "pglogic eval ../shared/data/arxiv_0704 --calibration unsupervised "
        "--calibration sigmoid:0.1857:18.76",
        "pglogic eval ../shared/data/reuters21578 --nl 20      # needs PGLOGIC_LLM_BASE_URL/MODEL",
        "pglogic eval ../shared/data/reuters21578 --long-only --family product-max-strong "
        "--mode none   # passages vs one vector",
        "pglogic eval ../shared/data/arxiv_0704 --no-passages  # one vector per document",
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
@click.option(
    "--mode",
    "modes",
    multiple=True,
    type=click.Choice([*EVAL_MODES, "none"]),
    help="Scoring mode to run besides the families (repeatable; 'none' for none) "
    "[default: all of them].",
)
@click.option(
    "--calibration",
    "calibrations",
    multiple=True,
    metavar="SPEC",
    help="Also run the default family with a calibrated truth map (repeatable): "
    "sigmoid:TAU:LAMBDA, 'unsupervised' (fitted here from the similarity distribution, no "
    "labels) or 'stored' (the model-wide fit stored with 'pglogic calibrate --save').",
)
@click.option("--no-plots", is_flag=True, help="Skip the PNG plots.")
@click.option(
    "--passages/--no-passages",
    default=True,
    show_default=True,
    help="Load the documents into a corpus with passages (each term's truth comes from its best "
    "passage; dense@passages, pglogic@documents and pglogic@max, every text's best passage, "
    "compare the layouts) or one vector each.",
)
@click.option("--passage-tokens", type=int, metavar="N", help="Word pieces per passage.")
@click.option("--passage-overlap", type=int, metavar="N", help="Word pieces shared by neighbours.")
@click.option(
    "--long-only",
    is_flag=True,
    help="Keep only the documents longer than the model's window (what one vector cannot "
    "read whole); queries and ground truth come from them.",
)
@click.option(
    "--nl",
    "nl",
    type=click.IntRange(min=1),
    metavar="N",
    help="Instead: ITLR's natural-language protocol on N derived queries with NOT and N without "
    "(an LLM writes each as a question; dense, BRIGHT-style and pglogic with the LLM's rewrite "
    "are compared); needs an LLM endpoint ($PGLOGIC_LLM_BASE_URL, $PGLOGIC_LLM_MODEL).",
)
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
    modes: tuple[str, ...],
    calibrations: tuple[str, ...],
    no_plots: bool,
    passages: bool,
    passage_tokens: int | None,
    passage_overlap: int | None,
    long_only: bool,
    nl: int | None,
) -> None:
    """Compare pglogic with dense retrieval and the baselines on DATASET's labels.

    DATASET is a directory with corpus.jsonl[.gz] (id, text, labels), and optionally
    labels.json (label names) and queries.jsonl (text, logical, relevant, negatives). Logical
    queries with exact ground truth are derived from the labels; every method runs in Postgres;
    nDCG@10, MRR@10, mAP@100, Recall@100 and NegRecall@10 are reported per template, number of
    negations and number of terms, with Wilcoxon tests against dense retrieval. The engine's
    other scoring modes (NSFL, SQO) and calibrated truth maps are also tested against the
    default engine.
    """
    llm = _check_eval_options(truth, calibrations, nl)
    fams = list({(f := resolve_family(spec)).spec: f for spec in families}.values())
    fams = fams or default_families()
    run_modes = tuple(m for m in dict.fromkeys(modes) if m != "none") if modes else EVAL_MODES
    ds = load_dataset(dataset, names=names)
    if long_only:
        from pglogic.embed.passages import tokenizer_of
        from pglogic.embed.registry import get_embedder
        from pglogic.eval.long_docs import long_only as restrict

        ds = restrict(ds, tokenizer_of(get_embedder(model)))
    derived = derive_queries(ds, per_template=per_template, seed=seed, max_given=max_given)
    if not derived.queries:
        raise click.ClickException(f"No query could be derived from {dataset}")
    api = ui.api(ctx)
    if llm is not None and nl is not None:
        _eval_nl(api, llm, ds, derived.queries, nl, seed, model, corpus_name, out)
        return
    maps = _given_truth_maps(api, model, calibrations)
    result = _run_eval(
        api, ds, derived, model=model, corpus_name=corpus_name, families=fams, truth=truth,
        modes=run_modes, maps=maps, unsupervised="unsupervised" in calibrations,
        layout=(passages, passage_tokens, passage_overlap),
    )  # fmt: skip
    paths = write_report(result, out or Path(f"eval-{ds.name}"), plots=not no_plots)
    _print_eval_summary(result, len(ds.doc_ids), paths)


def _check_eval_options(
    truth: str, calibrations: tuple[str, ...], nl: int | None
) -> LLMConfig | None:
    """Refuse bad truth maps before loading anything; the LLM endpoint of ``--nl`` (else None)."""
    resolve_truth(truth)
    llm = LLMConfig.resolve() if nl is not None else None
    for spec in calibrations:
        if spec not in ("unsupervised", "stored"):
            resolve_truth(spec)
    return llm


def _given_truth_maps(api: Any, model: str, calibrations: tuple[str, ...]) -> dict[str, str]:
    """The ``--calibration`` maps known before the run: each sigmoid spec, and ``stored`` (the
    model-wide fit in the database; ClickException when there is none)."""
    maps = {spec: spec for spec in calibrations if spec.startswith("sigmoid")}
    if "stored" in calibrations:
        with api.connect(write=False) as conn:
            stored = [c for c in list_calibrations(conn) if c.model == model and c.corpus is None]
        if not stored:
            raise click.ClickException(
                f"No model-wide calibration stored for {model!r}: run 'pglogic calibrate "
                "DATASET --save' first"
            )
        maps["stored"] = truth_spec(stored[0].calibration)
    return maps


def _run_eval(
    api: Any,
    ds: Dataset,
    derived: Derived,
    *,
    model: str,
    corpus_name: str | None,
    families: list[OperatorFamily],
    truth: str,
    modes: tuple[str, ...],
    maps: dict[str, str],
    unsupervised: bool,
    layout: tuple[bool, int | None, int | None] = (True, None, None),
) -> EvalResult:
    """Load the corpus, fit the ``unsupervised`` map if asked, and run every method, with
    progress bars."""
    with progress_bar() as bar:
        on_ingest = _task(bar, f"load {ds.name}")
        if unsupervised:
            own = calibrate_dataset(
                api, ds, model=model, corpus_name=corpus_name, unsupervised=True,
                on_ingest=on_ingest,
            )  # fmt: skip
            maps = {**maps, "unsupervised": truth_spec(own)}
        on_query = _task(bar, "queries", len(derived.queries))
        return evaluate_dataset(
            api,
            ds,
            model=model,
            corpus_name=corpus_name,
            derived=derived,
            families=families,
            on_ingest=on_ingest,
            on_query=on_query,
            truth=truth,
            modes=modes,
            calibrations=maps,
            layout=layout,
        )


def _print_eval_summary(result: EvalResult, n_docs: int, paths: list[Path]) -> None:
    """The headline nDCG@10 (dense vs the default engine), the targets and the files written."""
    s = result.summary
    console.print(
        f"{len(result.queries)} queries on {n_docs:,} documents in {result.seconds:.0f}s."
        f" nDCG@10: {DENSE} {s[DENSE]['ndcg@10']:.3f}, {HEADLINE} {s[HEADLINE]['ndcg@10']:.3f}"
        if HEADLINE in s
        else f"{len(result.queries)} queries in {result.seconds:.0f}s."
    )
    for name, check in targets(result).items():
        console.print(f"  {'met   ' if check['met'] else 'MISSED'} {name}")
    console.print("Wrote " + ", ".join(str(p) for p in paths))


@click.command(
    "calibrate",
    epilog=example(
        "pglogic calibrate ../shared/data/reuters21578",
        "pglogic calibrate ../shared/data/reuters21578 --save            # for every corpus of the model",
        "pglogic calibrate ../shared/data/reuters21578 --for-corpus news # for corpus news only",
        "pglogic calibrate mydata --unsupervised --json",
        "pglogic calibrate --from-corpus news --save                    # no labels: searched terms",
        "pglogic calibrate --from-corpus news --terms terms.txt --for-corpus news",
    ),
)
@click.argument(
    "dataset",
    required=False,
    type=click.Path(path_type=Path, exists=True, file_okay=False, dir_okay=True),
)
@click.option(
    "--from-corpus",
    metavar="NAME",
    help="Fit without labels (no DATASET) from corpus NAME's embeddings and the terms cached "
    "for its model (terms users searched), or --terms.",
)
@click.option(
    "--terms",
    "terms_file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="With --from-corpus: a text file of terms, one per line (at least 5).",
)
@click.option(
    "--model",
    help=f"Embedding model [default: {DEFAULT_MODEL}; with --from-corpus the corpus's].",
)
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
@click.option(
    "--save",
    is_flag=True,
    help="Store the fit for the model: searches with --truth calibrated use it on every corpus "
    "of the model that has no fit of its own.",
)
@click.option(
    "--for-corpus", metavar="NAME", help="Store the fit for corpus NAME only (implies --save)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the parameters as JSON.")
@click.pass_context
def calibrate_cmd(
    ctx: click.Context,
    dataset: Path | None,
    from_corpus: str | None,
    terms_file: Path | None,
    model: str | None,
    corpus_name: str | None,
    names: Path | None,
    unsupervised: bool,
    save: bool,
    for_corpus: str | None,
    as_json: bool,
) -> None:
    """Fit ITLR's calibrated truth map sigma((s - tau) * lambda) for a model, and store it.

    From DATASET: each label's name is a query term; documents that carry the label are
    relevant, ten times as many that do not are not; a class-balanced logistic regression of
    relevance on cosine similarity gives tau (similarity at truth 0.5) and lambda. With
    --from-corpus NAME instead: no labels; tau and lambda come from the distribution of the
    similarities of terms to the corpus's documents. Use the printed spec with --truth on
    search, compile and eval, or --save / --for-corpus to store it in the database for
    --truth calibrated (also "truth": "calibrated" in pglogic.search() in SQL).
    """
    if (dataset is None) == (from_corpus is None):
        raise click.UsageError("Give a DATASET directory or --from-corpus NAME (one of them)")
    if from_corpus is not None and (corpus_name or names):
        raise click.UsageError("--corpus and --names apply to a DATASET, not to --from-corpus")
    if terms_file is not None and from_corpus is None:
        raise click.UsageError("--terms applies to --from-corpus")
    api = ui.api(ctx)
    source = api.corpus(from_corpus) if from_corpus is not None else None
    if source is not None and model not in (None, source.model):
        raise click.UsageError(f"Corpus {source.name!r} uses model {source.model!r}, not {model!r}")
    model = source.model if source is not None else model or DEFAULT_MODEL
    target = api.corpus(for_corpus) if for_corpus is not None else None
    target_id = target.id if target is not None else None
    save = save or target is not None
    if save:
        with api.connect() as conn:  # refuse before the (long) fit
            check_target(conn, model, target_id)
    if source is not None:
        with api.connect(write=False) as conn:
            fit = fit_from_corpus(conn, source, read_terms(terms_file) if terms_file else None)
        cal, origin = fit.calibration, fit.source(source.name)
    else:
        assert dataset is not None
        cal, origin = _fit_dataset(api, dataset, model, corpus_name, names, unsupervised)
    if save:
        with api.connect() as conn:
            save_calibration(conn, model, cal, corpus_id=target_id, source=origin)
    _print_fit(cal, model, origin, for_corpus, saved=save, as_json=as_json)


def _fit_dataset(
    api: Any,
    dataset: Path,
    model: str,
    corpus_name: str | None,
    names: Path | None,
    unsupervised: bool,
) -> tuple[Calibration, str]:
    """Fit from a labelled dataset directory (loading its corpus, with a progress bar); the fit
    and its origin (the dataset's name)."""
    ds = load_dataset(dataset, names=names)
    with progress_bar() as bar:
        cal = calibrate_dataset(
            api,
            ds,
            model=model,
            corpus_name=corpus_name,
            unsupervised=unsupervised,
            on_ingest=_task(bar, f"load {ds.name}"),
        )
    return cal, ds.name


def _print_fit(
    cal: Calibration, model: str, origin: str, for_corpus: str | None, *, saved: bool, as_json: bool
) -> None:
    """Print a fit: as JSON, or its parameters and how to use it (``--truth``)."""
    spec = f"sigmoid:{cal.tau:.4g}:{cal.lam:.4g}"
    if as_json:
        stored = {"model": model, "corpus": for_corpus} if saved else None
        click.echo(json.dumps({**cal.to_dict(), "model": model, "truth": spec, "stored": stored}))
        return
    auc = "" if cal.auc is None else f", AUC {cal.auc:.3f} over {cal.n_pairs:,} pairs"
    _say(f"{model} on {origin} ({cal.method}{auc}): tau = {cal.tau:.4f}, lambda = {cal.lam:.2f}")
    if saved:
        _say(f"Stored for model {model!r} ({_scope(for_corpus)}): {truth_spec(cal)}")
        _say("Use: --truth calibrated")
    else:
        _say(f"Use: --truth {spec}  (or --save to store it)")


def _say(text: str) -> None:
    """Print one line as it is (no markup, no wrapping)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def _scope(corpus: str | None) -> str:
    return "model-wide" if corpus is None else f"for corpus {corpus!r}"


@click.group(
    epilog=example(
        "pglogic calibration list",
        "pglogic calibration delete all-MiniLM-L6-v2",
        "pglogic calibration delete all-MiniLM-L6-v2 --for-corpus news",
    )
)
def calibration() -> None:
    """See and remove the calibrations stored by 'pglogic calibrate --save'.

    A search with --truth calibrated uses the corpus's own calibration, else its model's.
    """


@calibration.command(
    "list", epilog=example("pglogic calibration list", "pglogic calibration list --json")
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line.")
@click.pass_context
def calibration_list(ctx: click.Context, as_json: bool) -> None:
    """List the stored calibrations.

    One row per model (corpus "-": model-wide) and per corpus with its own fit: tau, lambda,
    method, source, AUC (supervised fits) and when it was fitted.
    """
    with ui.api(ctx).connect(write=False) as conn:
        rows = list_calibrations(conn)
    if as_json:
        for r in rows:
            out = {"model": r.model, "corpus": r.corpus, **r.calibration.to_dict()}
            out |= {"truth": r.truth, "source": r.source, "fitted_at": r.fitted_at.isoformat()}
            click.echo(json.dumps(out, ensure_ascii=False))
        return
    if not rows:
        _say("No calibrations stored yet (pglogic calibrate DATASET --save).")
        return
    table = Table("model", "corpus", "tau", "lambda", "method", "source", "AUC", "fitted")
    for r in rows:
        cal = r.calibration
        table.add_row(
            Text(r.model),
            Text(r.corpus or "-"),
            f"{cal.tau:.4f}",
            f"{cal.lam:.2f}",
            cal.method,
            Text(r.source or "-"),
            "-" if cal.auc is None else f"{cal.auc:.3f}",
            r.fitted_at.strftime("%Y-%m-%d %H:%M"),
        )
    console.print(table)


@calibration.command(
    "delete",
    epilog=example(
        "pglogic calibration delete all-MiniLM-L6-v2                    # the model-wide fit",
        "pglogic calibration delete all-MiniLM-L6-v2 --for-corpus news  # corpus news's own fit",
    ),
)
@click.argument("model")
@click.option("--for-corpus", metavar="NAME", help="Delete corpus NAME's own calibration.")
@click.pass_context
def calibration_delete(ctx: click.Context, model: str, for_corpus: str | None) -> None:
    """Delete a stored calibration of MODEL.

    Without --for-corpus the model-wide one; corpora with their own calibration keep it.
    """
    api = ui.api(ctx)
    target = api.corpus(for_corpus) if for_corpus is not None else None
    with api.connect() as conn:
        deleted = delete_calibration(conn, model, target.id if target is not None else None)
    if not deleted:  # (exit 2, as every other "not found")
        raise InvalidInput(f"No calibration stored for model {model!r} ({_scope(for_corpus)})")
    _say(f"Deleted the calibration of model {model!r} ({_scope(for_corpus)}).")


def _eval_nl(
    api: Any,
    base: LLMConfig,
    ds: Any,
    queries: Any,
    n: int,
    seed: int,
    model: str,
    corpus_name: str | None,
    out: Path | None,
) -> None:
    """``pglogic eval DATASET --nl N``: the natural-language protocol (:mod:`pglogic.eval.nl`)."""
    from pglogic.eval.evaluate import corpus_name_for, prepare_corpus
    from pglogic.eval.nl import NL_METHODS, evaluate_nl, item_json, sample_queries, summarise_items
    from pglogic.llm.client import get_client

    def client(max_tokens: int) -> Any:
        return get_client(
            LLMConfig(base.base_url, base.model, api_key=base.api_key, timeout=base.timeout,
                      max_tokens=max_tokens)
        )  # fmt: skip

    chosen = sample_queries(queries, n, n, seed)
    name = corpus_name or corpus_name_for(ds, model)
    with progress_bar() as bar:
        prepare_corpus(api, ds, name, model, on_ingest=_task(bar, f"load {ds.name}"))
        items, per_query = evaluate_nl(
            api, ds, chosen, question_client=client(96), rewrite_client=client(256),
            reasoning_client=client(96), corpus_name=name,
            on_stage=lambda stage: _task(bar, stage, len(chosen)),
        )  # fmt: skip
    summary = summarise_items(items, per_query)
    out_dir = out or Path(f"eval-{ds.name}")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "nl-results.json"
    doc = {"dataset": ds.name, "llm": base.model, "summary": summary,
           "items": [item_json(i) for i in items]}  # fmt: skip
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    table = Table(title=f"{len(items)} questions on {ds.name} (LLM {base.model})")
    table.add_column("method")
    table.add_column("nDCG@10", justify="right")
    table.add_column("NegRecall@10", justify="right")
    for m in NL_METHODS:
        table.add_row(m, f"{summary['ndcg@10'][m]:.3f}", f"{summary['negrecall@10'][m]:.3f}")
    console.print(table)
    rw = summary["rewrite"]
    console.print(
        f"Rewrite: exact {rw['exact']:.2f}, equivalent {rw['equivalent']:.2f}, fallback "
        f"{rw['fallback_rate']:.2f}, p50 {rw['latency']['p50_s']:.2f}s"
    )
    console.print(f"Wrote {path}")


#: The commands this module adds to ``pglogic``.
COMMANDS = (
    eval_cmd,
    calibrate_cmd,
    calibration,
)
