"""A chat client that keeps every answer of the LLM in a JSONL file, so a rerun of the
natural-language benchmarks (``bench/quality/nl/run.py``, ``bench/quality/nl/real/rewrites.py``)
asks only for what is new and reports the latency that was measured."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pglogic.llm.client import Completion


class DiskCachedChat:
    """A chat client whose answers are kept in a JSONL file (model + messages → text, seconds)."""

    def __init__(self, client: Any, path: Path) -> None:
        self.client = client
        self.config = client.config
        self.path = path
        self.items: dict[str, dict[str, Any]] = {}
        self.hits = 0
        self.calls = 0
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    rec = json.loads(line)
                    self.items[rec["key"]] = rec

    def key(
        self, messages: Sequence[dict[str, str]], extra: Mapping[str, Any] | None = None
    ) -> str:
        parts: list[Any] = [self.config.model, self.config.max_tokens, list(messages)]
        if extra:  # answers asked without a constraint keep their old keys
            parts.append(dict(extra))
        blob = json.dumps(parts, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    def output_mode(self) -> str:
        mode: str = self.client.output_mode()
        return mode

    def complete(
        self, messages: list[dict[str, str]], *, extra: Mapping[str, Any] | None = None
    ) -> Completion:
        k = self.key(messages, extra)
        rec = self.items.get(k)
        if rec is not None:
            self.hits += 1
            return Completion(
                rec["text"], rec["model"], 1, rec["seconds"], rec.get("constrained", False)
            )
        self.calls += 1
        c: Completion = self.client.complete(messages, extra=extra)
        rec = {"key": k, "model": c.model, "text": c.text, "seconds": round(c.seconds, 4),
               "constrained": c.constrained}  # fmt: skip
        self.items[k] = rec
        with self.path.open("a") as fh:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        return c
