"""Scripted OpenAI-compatible HTTP servers for tests: chat completions and embeddings.

Each is a real HTTP server on 127.0.0.1 (a free port) in a thread, so clients run their whole
path (the ``openai`` SDK over TCP). Replies are queued with :meth:`ScriptedServer.script`: a
success, an HTTP error with headers, a slow answer, or a raw JSON body; every request is recorded.
``GET /v1/models`` lists one model owned by :attr:`ScriptedServer.owned_by` (None: HTTP 404);
those requests are recorded in ``gets``.

Example (a pytest fixture)::

    @pytest.fixture(scope="module")
    def server() -> Iterator[ChatServer]:
        with ChatServer() as srv:
            yield srv
"""

from __future__ import annotations

import json
import threading
import time
import uuid
import zlib
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self

import numpy as np


@dataclass
class Reply:
    """One scripted response after ``delay`` seconds: a success (``content``: the assistant's
    text for chat, the vectors for embeddings, None for the server's default), an HTTP error
    (``status`` != 200, with ``error`` as its message), or ``raw``: that JSON body verbatim."""

    content: Any = None
    status: int = 200
    error: str = "scripted error"
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    raw: Any = None
    code: str | None = None


class ScriptedServer:
    """``POST`` to :attr:`route` on 127.0.0.1, answering from a script; use as a context manager.

    With no reply queued it answers HTTP 500 "the test script has no more replies"; any other
    path gets a 404.
    """

    route: ClassVar[str]

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.gets: list[str] = []
        self.owned_by: str | None = "scripted"
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with server.lock:
                    server.gets.append(self.path)
                    owner = server.owned_by
                status, body = 404, {"error": {"message": f"no route {self.path}"}}
                if self.path == "/v1/models" and owner is not None:
                    model = {"id": "scripted-model", "object": "model", "owned_by": owner}
                    status, body = 200, {"object": "list", "data": [model]}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                payload = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append(
                        {
                            "path": self.path,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                            "json": payload,
                            "time": time.monotonic(),
                        }
                    )
                    reply = server.replies.popleft() if server.replies else None
                if reply is None:
                    reply = Reply(status=500, error="the test script has no more replies")
                if self.path != server.route:
                    reply = Reply(status=404, error=f"no route {self.path}")
                time.sleep(reply.delay)
                if reply.status != 200:
                    error = {"message": reply.error, "type": "scripted", "code": reply.code}
                    body: Any = {"error": error}
                elif reply.raw is not None:
                    body = reply.raw
                else:
                    body = server.render(reply, payload)
                data = json.dumps(body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def render(self, reply: Reply, payload: dict[str, Any]) -> Any:
        """The JSON body of a successful reply to ``payload``."""
        raise NotImplementedError

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def script(self, *replies: Reply | str) -> None:
        """Queue replies (anything but a :class:`Reply` is a success with that content)."""
        with self.lock:
            self.replies.extend(r if isinstance(r, Reply) else Reply(r) for r in replies)

    def reset(self) -> None:
        with self.lock:
            self.replies.clear()
            self.requests.clear()
            self.gets.clear()
            self.owned_by = "scripted"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ChatServer(ScriptedServer):
    """``/v1/chat/completions``: a reply's content is the assistant's message."""

    route = "/v1/chat/completions"

    def render(self, reply: Reply, payload: dict[str, Any]) -> Any:
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:8]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(payload.get("model")),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }


def fake_vector(text: str, dim: int) -> list[float]:
    """A deterministic, not normalised vector for ``text`` (the embeddings server's default)."""
    rng = np.random.default_rng(zlib.crc32(text.encode()))
    return [float(x) for x in rng.normal(size=dim) * 3]


class EmbeddingsServer(ScriptedServer):
    """``/v1/embeddings``: a reply's content is the list of vectors to send (in order, indexed);
    None sends :func:`fake_vector` of each input, ``dim`` long. Answers as floats even when the
    client asks for base64, as some servers do."""

    route = "/v1/embeddings"

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.dim = dim

    def render(self, reply: Reply, payload: dict[str, Any]) -> Any:
        texts = payload.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        vectors = reply.content
        if vectors is None:
            vectors = [fake_vector(t, self.dim) for t in texts]
        return {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)
            ],
            "model": str(payload.get("model")),
            "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
        }
