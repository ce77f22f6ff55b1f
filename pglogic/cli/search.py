"""``pglogic search`` and ``pglogic compile``: run a logical query, or print its SQL.

Example:
    $ pglogic search news '"grain" AND NOT "wheat"' --explain
    $ pglogic compile '"a" AND NOT "b"'
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from pglogic.cli import ui
from pglogic.cli.ui import example, print_hits
from pglogic.config import DEFAULT_MODEL
from pglogic.engine.compile import DEFAULT_RERANK_DEPTH, MODES
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, MAX_AND_TEXT
from pglogic.engine.negation import DEFAULT_NOT_CONTEXT, DEFAULT_NOT_MENTION
from pglogic.engine.operators import DEFAULT_FAMILY, PRESETS
from pglogic.engine.options import DEFAULT_PASSAGE_SCORE, LEXICAL, PASSAGE_SCORES

if TYPE_CHECKING:
    from pglogic.engine.compile import SearchOptions

#: How `pglogic compile` describes the guide vector parameter.
GUIDE_NOTE = "<guide vector: pglogic.engine.guide.guide_vector of the term embeddings>"
SQO_NOTE = "<SQO vector: pglogic.engine.sqo.sqo_vector of the term embeddings>"


def _search_options(
    k: int,
    operators: str,
    truth: str,
    exact: bool,
    depth: int | None,
    ef_search: int | None,
    where: tuple[str, ...],
    guide: bool = True,
    mode: str = "fuzzy",
    question: str | None = None,
    rerank_depth: int | None = None,
    seed: int = 0,
    term_scans: bool | None = None,
    timeout: float | None = None,
    and_text: int = DEFAULT_AND_TEXT,
    lexical: str = "crisp",
    not_context: float = DEFAULT_NOT_CONTEXT,
    not_mention: float = DEFAULT_NOT_MENTION,
) -> SearchOptions:
    from pglogic.engine.compile import SearchOptions
    from pglogic.engine.filters import parse_filter

    return SearchOptions(
        k=k,
        operators=operators,
        truth=truth,
        exact=exact,
        depth=depth,
        ef_search=ef_search,
        filters=tuple(parse_filter(w) for w in where),
        guide=guide,
        mode=mode,
        question=question,
        rerank_depth=rerank_depth,
        seed=seed,
        term_scans=term_scans,
        timeout=timeout,
        and_text=and_text,
        lexical=lexical,
        not_context=not_context,
        not_mention=not_mention,
    )


def search_options(f: Any) -> Any:
    """Options shared by ``search`` and ``compile``."""
    decorators = [
        click.option("-k", "--k", type=int, default=10, show_default=True, help="Hits to return."),
        click.option(
            "--operators",
            default=DEFAULT_FAMILY,
            show_default=True,
            help="Operator family: a preset (" + ", ".join(PRESETS) + ") or and=..,or=..,not=..",
        ),
        click.option(
            "--truth",
            default="clamp",
            show_default=True,
            help="Similarity-to-truth mapping: clamp, affine, sigmoid:TAU:LAMBDA, or calibrated "
            "(the fit stored with 'pglogic calibrate --save'; see 'pglogic calibration list').",
        ),
        click.option("--exact", is_flag=True, help="Score every document (no index)."),
        click.option("--depth", type=int, help="Candidates per positive term (default from k)."),
        click.option("--ef-search", type=int, help="hnsw.ef_search (default from depth)."),
        click.option(
            "--guide/--no-guide",
            default=True,
            show_default=True,
            help="One more candidate scan along a direction optimised for the whole formula.",
        ),
        click.option(
            "--term-scans/--no-term-scans",
            default=None,
            help="Force (or drop) the HNSW scan per positive term. Default: only for a query "
            "with a positive OR (an OR of terms under max: each term's top k, no guide); "
            "otherwise the guide's scan alone finds the candidates.",
        ),
        click.option(
            "--where",
            multiple=True,
            help="Metadata filter: KEY=VALUE, KEY>=VALUE, ... or a JSON object (repeatable).",
        ),
        click.option(
            "--mode",
            type=click.Choice(list(MODES)),
            default="fuzzy",
            show_default=True,
            help="Scoring: " + "; ".join(f"{name}: {what}" for name, what in MODES.items()) + ".",
        ),
        click.option(
            "--question",
            help="The monolithic question the NSFL modes also score (default: the query as text).",
        ),
        click.option(
            "--rerank-depth",
            type=int,
            help=f"K, the candidates the reranking modes rescore [{DEFAULT_RERANK_DEPTH}].",
        ),
        click.option(
            "--seed", type=int, default=0, show_default=True, help="Seed of the SQO ascent."
        ),
        click.option(
            "--and-text",
            type=click.IntRange(0, MAX_AND_TEXT),
            default=DEFAULT_AND_TEXT,
            show_default=True,
            help="Weight of each AND's own text: the phrase of its positive terms ('grain and "
            "shipping') is scored too and joins the AND this many times (once beside a NOT; "
            "fuzzy mode); 0: the formula alone.",
        ),
        click.option(
            "--not-context",
            type=click.FloatRange(0, 1),
            default=DEFAULT_NOT_CONTEXT,
            show_default=True,
            help="A term negated inside an AND is scored without this much of the AND's "
            "positive terms ('grain' AND NOT 'wheat': 'wheat' minus its 'grain' part; fuzzy "
            "mode; docs/evaluation.md); 0: the negated term as it is.",
        ),
        click.option(
            "--not-mention",
            type=click.FloatRange(0, 1),
            default=DEFAULT_NOT_MENTION,
            show_default=True,
            help="A negated term is at least this similar to a document whose words match it "
            "as a phrase ('grain' AND NOT 'wheat': a story that says 'wheat'; the corpus's "
            "lexical index, fuzzy mode; docs/evaluation.md); 0: the similarity alone.",
        ),
        click.option(
            "--lexical",
            type=click.Choice(list(LEXICAL)),
            default="crisp",
            show_default=True,
            help='Truth of a lexical term (match:word, match:"a phrase"): crisp is 1 when the '
            "document's words match, else 0 (exact exclusion under NOT); rank is the match's "
            "normalised ts_rank_cd.",
        ),
        click.option(
            "--timeout",
            type=float,
            metavar="SECONDS",
            help="Cancel the statement on the server after this long (statement_timeout); "
            "exit code 4.",
        ),
    ]
    for d in reversed(decorators):
        f = d(f)
    return f


@click.command(
    epilog=example(
        "pglogic search news 'oil prices'                      # plain semantic search",
        'pglogic search news \'"grain" AND NOT "wheat"\' --explain',
        'pglogic search se \'"bread" AND "baking"\' --where site=cooking -k 5',
        'pglogic search news \'("gold" OR "silver") AND NOT "mining"\' --operators godel --json',
        'pglogic search news \'"grain" AND NOT "wheat"\' --mode nsfl-rerank --rerank-depth 500',
        'pglogic search news \'"oil" AND "opec"\' --mode sqo',
        'pglogic search news \'"oil" AND "opec"\' --term-scans   # a scan per term + the guide',
        'pglogic search news \'"oil" AND NOT "gas"\' --exact --timeout 2   # give up after 2 s',
        "pglogic search news '\"grain\" AND NOT match:wheat'  # no story that names wheat",
        'pglogic search news \'"banks" AND match:"Basel III"\' --lexical rank --explain',
    )
)
@click.argument("corpus_name", metavar="CORPUS")
@click.argument("query")
@search_options
@click.option(
    "--passages/--no-passages",
    default=True,
    show_default=True,
    help="On a corpus with passages: each term's truth is its best passage's; "
    "--no-passages scores the documents' own vectors (their first window).",
)
@click.option(
    "--passage-score",
    type=click.Choice(list(PASSAGE_SCORES)),
    default=DEFAULT_PASSAGE_SCORE,
    show_default=True,
    help="Over passages: each text's best passage (max); for positive texts the mean of it and "
    "the document's own vector (blend), or that only in formulas with a NOT (blend-not); "
    "blend-not-or also adds a tenth of the own vector in formulas with neither a NOT nor an "
    "AND (docs/passages.md).",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Show each term's similarity per hit (and, over passages, the passage that decided it).",
)
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON lines.")
@click.pass_context
def search(
    ctx: click.Context,
    corpus_name: str,
    query: str,
    k: int,
    operators: str,
    truth: str,
    exact: bool,
    depth: int | None,
    ef_search: int | None,
    guide: bool,
    term_scans: bool | None,
    where: tuple[str, ...],
    mode: str,
    question: str | None,
    rerank_depth: int | None,
    seed: int,
    timeout: float | None,
    and_text: int,
    not_context: float,
    not_mention: float,
    lexical: str,
    passages: bool,
    passage_score: str,
    explain: bool,
    as_json: bool,
) -> None:
    """Search CORPUS with QUERY: plain text, or quoted terms with AND, OR, NOT, ( ).

    A quoted term ("wheat") is semantic: documents close in meaning. A lexical term
    (match:wheat, match:"Basel III") is true for the documents whose words match it
    (PostgreSQL full-text search: case-folded and stemmed with the corpus's configuration).

    --mode picks the scoring: fuzzy operators (default), the NSFL paper's operators over the
    terms and their fused texts (nsfl, nsfl-rerank), or spherical query optimisation (sqo,
    sqo-rerank). --explain shows every scored text's similarity, and on a corpus with passages
    which passage of the document decided it (its offsets and its first words).
    """
    opts = _search_options(
        k, operators, truth, exact, depth, ef_search, where, guide, timeout=timeout
    )
    api = ui.api(ctx)
    result = api.search(
        corpus_name,
        query,
        k=opts.k,
        operators=operators,
        truth=truth,
        exact=exact,
        depth=depth,
        ef_search=ef_search,
        filters=opts.filters,
        guide=guide,
        term_scans=term_scans,
        mode=mode,
        question=question,
        rerank_depth=rerank_depth,
        seed=seed,
        timeout=opts.timeout,
        and_text=and_text,
        lexical=lexical,
        passages=passages,
        passage_score=passage_score,
        not_context=not_context,
        not_mention=not_mention,
        explain_passages=explain or as_json,
    )
    if as_json:
        for h in result.hits:
            row: dict[str, Any] = {
                "id": h.external_id,
                "title": h.title,
                "score": h.score,
                "similarities": h.similarities,
            }
            if h.lexical:
                row["lexical"] = h.lexical
            if h.id in result.passages:
                row["passages"] = {
                    p.term: {"ord": p.ord, "start": p.start, "end": p.end,
                             "similarity": p.similarity, "snippet": p.snippet}
                    for p in result.passages[h.id]
                }  # fmt: skip
            click.echo(json.dumps(row, ensure_ascii=False))
        return
    print_hits(result, explain=explain)


@click.command(
    "compile",
    epilog=example(
        'pglogic compile \'"a" AND NOT "b"\'',
        'pglogic compile \'"grain" OR "corn"\' --corpus news --operators godel',
        'pglogic compile \'"a" AND NOT "b"\' --style numbered      # $1, $2, ... placeholders',
        'pglogic compile \'"grain" AND NOT "wheat"\' --corpus news --vectors inline',
        'pglogic compile \'"a" AND NOT "b"\' --mode nsfl',
    ),
)
@click.argument("query")
@click.option("--corpus", "corpus_name", help="Compile for this corpus (default: a 384-d sample).")
@search_options
@click.option(
    "--style",
    type=click.Choice(["psycopg", "numbered"]),
    default="psycopg",
    show_default=True,
    help="Placeholders: %(name)s (psycopg) or $1, $2, ... (numbered; their order is printed).",
)
@click.option(
    "--vectors",
    "vectors_mode",
    type=click.Choice(["params", "inline"]),
    default="params",
    show_default=True,
    help="inline: embed the terms with the corpus's model and write every value into the SQL "
    "(needs --corpus).",
)
@click.pass_context
def compile_cmd(
    ctx: click.Context,
    query: str,
    corpus_name: str | None,
    k: int,
    operators: str,
    truth: str,
    exact: bool,
    depth: int | None,
    ef_search: int | None,
    guide: bool,
    term_scans: bool | None,
    where: tuple[str, ...],
    mode: str,
    question: str | None,
    rerank_depth: int | None,
    seed: int,
    timeout: float | None,
    and_text: int,
    not_context: float,
    not_mention: float,
    lexical: str,
    style: str,
    vectors_mode: str,
) -> None:
    """Print the SQL statement QUERY compiles to, without running it."""
    from pglogic.engine.compile import compile_query
    from pglogic.engine.render import lexical_params, render, vector_note
    from pglogic.engine.source import Corpus
    from pglogic.query import to_tree

    if vectors_mode == "inline" and not corpus_name:
        raise click.UsageError("--vectors inline needs --corpus: the corpus's model embeds terms")
    opts = _search_options(
        k,
        operators,
        truth,
        exact,
        depth,
        ef_search,
        where,
        guide,
        mode,
        question,
        rerank_depth,
        seed,
        term_scans,
        timeout,
        and_text,
        lexical,
        not_context,
        not_mention,
    )
    note = SQO_NOTE if mode.startswith("sqo") else GUIDE_NOTE
    if corpus_name:
        compiled = ui.api(ctx).compile(corpus_name, query, opts)
    else:
        sample = Corpus(
            0, "sample", "corpus_0", DEFAULT_MODEL, 384, "cosine", "embedding", None, None,
            "english",
        )  # fmt: skip
        compiled = compile_query(to_tree(query), sample, opts)
    for name, value in compiled.settings.items():
        click.echo(f"SET LOCAL {name} = {value};")
    if vectors_mode == "inline" and corpus_name:
        from pglogic.embed.registry import get_query_embedder

        model = get_query_embedder(ui.api(ctx).corpus(corpus_name).model)
        vectors = dict(zip(compiled.terms, model.embed(compiled.terms), strict=True))
        click.echo(render(compiled, "numbered", vectors).text + ";")
        click.echo("-- parameters: none")
        return
    if style == "numbered":
        rendered = render(compiled, "numbered")
        click.echo(rendered.text + ";")
        click.echo("-- parameters, in order:")
        for i, name in enumerate(rendered.names, 1):
            term = rendered.vector_terms.get(name)
            if name == rendered.guide:
                value = note
            else:
                value = vector_note(compiled, term) if term is not None else rendered.params[name]
            click.echo(f"-- ${i} = {name}: {json.dumps(value, ensure_ascii=False)}")
        return
    click.echo(compiled.as_string() + ";")
    params = {k: v for k, v in compiled.params.items()}
    params.update({f"v{i}": vector_note(compiled, t) for i, t in enumerate(compiled.terms)})
    params.update(lexical_params(compiled))
    if compiled.guide_param:
        params[compiled.guide_param] = note
    click.echo("-- parameters: " + json.dumps(params, ensure_ascii=False))
