"""``pglogic search`` and ``pglogic compile``: run a logical query, or print its SQL.

Example:
    $ pglogic search news '"grain" AND NOT "wheat"' --explain
    $ pglogic compile '"a" AND NOT "b"'
"""

from __future__ import annotations

import json
import warnings
from typing import TYPE_CHECKING, Any

import click

from pglogic.cli import ui
from pglogic.cli.ui import example, print_hits, search_option
from pglogic.config import DEFAULT_MODEL
from pglogic.engine import defaults

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
    guide: bool = defaults.GUIDE,
    mode: str = defaults.MODE,
    question: str | None = None,
    rerank_depth: int | None = None,
    seed: int = 0,
    term_scans: bool | None = None,
    timeout: float | None = None,
    and_text: int = defaults.AND_TEXT,
    lexical: str = defaults.LEXICAL,
    not_context: float = defaults.NOT_CONTEXT,
    not_mention: float = defaults.NOT_MENTION,
) -> SearchOptions:
    from pglogic.engine.compile import SearchOptions
    from pglogic.engine.filters import parse_filters

    return SearchOptions(
        k=k,
        operators=operators,
        truth=truth,
        exact=exact,
        depth=depth,
        ef_search=ef_search,
        filters=parse_filters(list(where)),
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
    """Options shared by ``search`` and ``compile``: each as
    :data:`pglogic.engine.options.OPTIONS` declares it (:func:`pglogic.cli.ui.search_option`).
    """
    decorators = [
        search_option("k", "-k", "--k"),
        search_option("operators"),
        search_option(
            "truth",
            note=" 'pglogic calibrate --save' stores fits ('pglogic calibration list' shows them).",
        ),
        search_option("exact"),
        search_option("depth"),
        search_option("ef_search"),
        search_option("guide", "--guide/--no-guide"),
        search_option("term_scans", "--term-scans/--no-term-scans"),
        search_option("filters", "--where", multiple=True, note=" Repeatable."),
        search_option("mode"),
        search_option("question"),
        search_option("rerank_depth"),
        search_option("seed"),
        search_option("and_text"),
        search_option("not_context"),
        search_option("not_mention"),
        search_option("lexical"),
        search_option("timeout", metavar="SECONDS", note=" Exit code 4."),
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
@search_option("passages", "--passages/--no-passages")
@search_option("passage_score")
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
    from pglogic.errors import PlainTextWarning
    from pglogic.query import plain_text_note

    if note := plain_text_note(query):
        ui.err_console.print(f"Warning: {note}", soft_wrap=True, markup=False)
    with warnings.catch_warnings():  # (said above, in the command's words)
        warnings.simplefilter("ignore", PlainTextWarning)
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
