"""Evaluate on long documents only: a dataset restricted to the documents the model cannot read whole.

``pglogic eval DATASET --long-only`` keeps the documents whose text (title and body, as the
model reads it) has more word pieces than the model's window, writes them to a corpus file of
their own (labels and all fields kept) and evaluates on that: the derived queries and their
ground truth come from these documents' labels alone. Single-vector retrieval sees only the
first window of each of them; passages see all of it.

Example:
    >>> from pglogic.embed.passages import Tokenizer, word_offsets
    >>> tok = Tokenizer(3, word_offsets, False, "words")
    >>> is_long({"title": "T", "text": "a b c"}, tok), is_long({"text": "a b"}, tok)
    (True, False)
"""

from __future__ import annotations

import gzip
import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from pglogic.embed.passages import Tokenizer
from pglogic.errors import InvalidInput
from pglogic.eval.data import Dataset, load_dataset

#: Where restricted corpus files are written (one per dataset and window).
CACHE = Path(tempfile.gettempdir()) / "pglogic-eval"


def is_long(obj: dict[str, Any], tokenizer: Tokenizer) -> bool:
    """Whether a corpus line's text (its ``title`` and ``text``, as ingest embeds them) has
    more tokens than the tokenizer's window.

    Example:
        >>> from pglogic.embed.passages import Tokenizer, word_offsets
        >>> is_long({"text": "a b c d"}, Tokenizer(None, word_offsets, False, "words"))
        False
    """
    if tokenizer.window is None:
        return False
    title, text = obj.get("title"), str(obj.get("text") or "")
    embed_text = f"{title}\n{text}" if title else text
    return tokenizer.count(embed_text) > tokenizer.window


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line for line in f if line.strip()]


def long_only(ds: Dataset, tokenizer: Tokenizer, directory: Path = CACHE) -> Dataset:
    """``ds`` restricted to its documents longer than the tokenizer's window (a new corpus file
    under ``directory``, dataset name ``<name>_long``); the dataset's own queries are dropped
    (their relevance judgements cover documents outside the subset). InvalidInput when the
    tokenizer has no window or no document is long.

    Example:
        >>> long_only(load_dataset(Path("../shared/data/reuters21578")), tokenizer_of(emb)).name  # doctest: +SKIP
        'reuters21578_long'
    """
    if tokenizer.window is None:
        raise InvalidInput(f"--long-only needs a model with a known window ({tokenizer.name})")
    kept = [line for line in _lines(ds.corpus_file) if is_long(json.loads(line), tokenizer)]
    if not kept:
        raise InvalidInput(
            f"No document of {ds.name} is longer than the model's window of {tokenizer.window}"
        )
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / f"{ds.name}_long_{tokenizer.window}" / "corpus.jsonl"
    out.parent.mkdir(exist_ok=True)
    out.write_text("".join(kept), encoding="utf-8")
    sub = load_dataset(out.parent)
    return replace(ds, name=f"{ds.name}_long", path=out.parent, corpus_file=out,
                   doc_ids=sub.doc_ids, labels=sub.labels, queries=())  # fmt: skip
