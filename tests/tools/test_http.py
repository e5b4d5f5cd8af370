"""`http_get` against a local http.server on 127.0.0.1 (loopback only), which
the org policy's `internal_hosts` lets these tests reach; and the refusal of
every internal address without it, whatever name leads there."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import runtime.tools  # noqa: F401  (registers the built-ins)
from runtime.errors import ToolError
from runtime.registry.capabilities import ToolContext, ToolOutput, registry
from runtime.types import Risk, Status

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 200
BIG = "".join(f"line {n}\n" for n in range(20000))
KEY = "AKIA" + "Z7QW3MNB5XK2LP4R"  # an AWS access key id's shape
SECRET_AT_LIMIT = ("a" * 990 + " " + KEY + "\n").encode()  # the key spans byte 1,000
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY")


class Handler(BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, dict[str, str], bytes]] = {}

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        port = self.server.server_address[1]
        routes = {
            "/text": (200, {"Content-Type": "text/plain; charset=utf-8"}, "hello wörld\n".encode()),
            "/latin": (
                200,
                {"Content-Type": "text/plain; charset=latin-1"},
                "caf\xe9".encode("latin-1"),
            ),
            "/json": (200, {"Content-Type": "application/json"}, b'{"a": 1}'),
            "/missing": (404, {"Content-Type": "text/plain"}, b"not here"),
            "/broken": (500, {"Content-Type": "text/html"}, b"<h1>oops</h1>"),
            "/image.png": (200, {"Content-Type": "image/png"}, PNG),
            "/blob": (200, {}, b"\x00\x01\x02" * 100),
            "/big": (200, {"Content-Type": "text/plain"}, BIG.encode()),
            "/redirect": (302, {"Location": "/text"}, b""),
            "/away": (302, {"Location": f"http://localhost:{port}/text"}, b""),
            "/file": (302, {"Location": "file:///etc/passwd"}, b""),
            "/loop": (302, {"Location": "/loop"}, b""),
            "/secret": (200, {"Content-Type": "text/plain"}, SECRET_AT_LIMIT),
        }
        status, headers, body = routes.get(self.path, (404, {}, b""))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


LOCAL = ("127.0.0.1",)  # what the org policy lets these tests reach


def get(
    url: str, result_bytes: int = 32 * 1024, internal: tuple[str, ...] = LOCAL, **args
) -> ToolOutput:
    spec = registry.get("http_get")
    ctx = ToolContext(
        workspace=".",
        batch_id="b",
        call_id="c",
        max_bytes=result_bytes,
        internal_hosts=internal,
    )
    return spec.execute(spec.input_model(url=url, **args), ctx)


def refused(url: str, **args) -> str:
    """The message of a `denied` end of `http_get` for `url`."""
    with pytest.raises(ToolError) as caught:
        get(url, **args)
    assert caught.value.status is Status.denied, caught.value
    return str(caught.value)


def test_spec() -> None:
    spec = registry.get("http_get")
    assert spec.risk is Risk.external and spec.idempotent
    assert spec.subject == ("url", "url")
    assert spec.timeout


def test_text(server: str) -> None:
    out = get(f"{server}/text")
    assert out.content["status"] == 200
    assert out.content["text"] == "hello wörld\n"
    assert out.content["url"] == f"{server}/text"
    assert out.content["headers"]["content-type"].startswith("text/plain")
    assert out.content["truncated"] is False
    assert "200" in out.message and "hello wörld" in out.message
    assert "200" in out.summary


def test_a_secret_across_the_limit_is_redacted_before_the_cut(server: str) -> None:
    out = get(f"{server}/secret", max_bytes=1000)
    assert out.content["truncated"] is True
    text = out.content["text"]
    assert len(text.encode()) <= 1000
    assert "Z7QW" not in text and "AKIA" not in text
    assert "Z7QW" not in out.message


def test_charset_and_json(server: str) -> None:
    assert get(f"{server}/latin").content["text"] == "café"
    assert get(f"{server}/json").content["text"] == '{"a": 1}'


def test_error_statuses_are_answers(server: str) -> None:
    missing = get(f"{server}/missing")
    assert missing.content["status"] == 404 and missing.content["text"] == "not here"
    assert "404" in missing.message
    assert get(f"{server}/broken").content["status"] == 500


def test_binary_is_described(server: str) -> None:
    out = get(f"{server}/image.png")
    assert "text" not in out.content
    assert "image/png" in out.content["binary"] and str(len(PNG)) in out.content["binary"]
    assert "\x00" not in out.message
    blob = get(f"{server}/blob")
    assert "binary" in blob.content and "text" not in blob.content


def test_body_is_bounded(server: str) -> None:
    out = get(f"{server}/big", result_bytes=4096)
    assert out.content["truncated"] is True
    assert out.content["text"].startswith("line 0\n")
    assert len(json.dumps(out.content, ensure_ascii=False).encode()) <= 4096
    assert "cut" in out.message
    small = get(f"{server}/big", max_bytes=100)
    assert small.content["truncated"] is True
    assert len(small.content["text"].encode()) <= 100


def test_tiny_result_limit_still_answers(server: str) -> None:
    out = get(f"{server}/big", result_bytes=1024)
    assert out.content["truncated"] is True and out.content["text"].startswith("line")


def test_same_host_redirect_is_followed(server: str) -> None:
    out = get(f"{server}/redirect")
    assert out.content["status"] == 200
    assert out.content["url"] == f"{server}/text"
    assert out.content["text"] == "hello wörld\n"


def test_redirect_to_another_host_is_not_followed(server: str) -> None:
    out = get(f"{server}/away")
    assert out.content["status"] == 302
    assert out.content["headers"]["location"].startswith("http://localhost:")
    assert "not followed" in out.message


def test_redirect_to_file_is_not_followed(server: str) -> None:
    out = get(f"{server}/file")
    assert out.content["status"] == 302
    assert "root:" not in out.message


def test_redirect_loop_stops(server: str) -> None:
    with pytest.raises(ToolError, match="redirects"):
        get(f"{server}/loop")


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://127.0.0.1/x",
        "data:text/plain,hello",
        "gopher://127.0.0.1/",
        "/etc/passwd",
        "127.0.0.1/text",
        "http://",
        "http://user:pw@127.0.0.1/",
        "http://127.0.0.1@evil.example/",
        "http://127.0.0.1:99999/",
        "http://127.0.0.1/ x",
        "http://127.0.0.1\\@evil.example/",
    ],
)
def test_refused_urls(url: str) -> None:
    with pytest.raises(ToolError):
        get(url)


def test_connection_refused_is_an_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ToolError, match="cannot fetch"):
        get(f"http://127.0.0.1:{port}/")


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://127.0.0.1:9/", "loopback"),
        ("http://127.9.9.9/", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://[::]/", "unspecified"),
        ("http://10.1.2.3/", "private"),
        ("http://172.16.0.1/", "private"),
        ("http://172.31.255.1/", "private"),
        ("http://192.168.1.1/", "private"),
        ("http://[fc00::1]/", "private"),
        ("http://[fd12:3456::1]/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://100.64.0.1/", "shared"),
        ("http://224.0.0.1/", "multicast"),
        ("http://2130706433/", "loopback"),  # 127.0.0.1 as one number
        ("http://0x7f.1/", "loopback"),
    ],
)
def test_internal_addresses_are_denied_naming_their_class(url: str, kind: str) -> None:
    message = refused(url, internal=())
    assert kind in message and "internal_hosts" in message


def test_a_name_is_checked_by_the_address_it_resolves_to(server: str) -> None:
    port = server.rsplit(":", 1)[1]
    assert "loopback" in refused(f"http://localhost:{port}/text", internal=())
    assert "loopback" in refused(f"{server}/text", internal=("10.0.0.0/8", "example.com"))


def test_org_policy_allows_a_named_host_or_a_range(server: str) -> None:
    port = server.rsplit(":", 1)[1]
    assert get(f"http://localhost:{port}/text", internal=("localhost",)).content["status"] == 200
    assert get(f"{server}/text", internal=("127.0.0.0/8",)).content["status"] == 200


class Resolver:
    """`socket.getaddrinfo` for made-up names: each lookup of a name takes the
    next of its addresses (the last one repeats), as a rebinding DNS server answers."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, names: dict[str, list[str]]) -> None:
        self.names, self.lookups = names, []
        self.real = socket.getaddrinfo
        monkeypatch.setattr(socket, "getaddrinfo", self)

    def __call__(self, host, port, *args, **kwargs):
        if host not in self.names:
            return self.real(host, port, *args, **kwargs)
        self.lookups.append(host)
        answers = self.names[host]
        address = answers.pop(0) if len(answers) > 1 else answers[0]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port)))]


@pytest.fixture
def inside(server: str) -> Iterator[None]:
    """A second server, on 127.0.0.3 and the first one's port: what a
    rebinding name would reach."""

    class Secret(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", "6")
            self.end_headers()
            self.wfile.write(b"secret")

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.3", int(server.rsplit(":", 1)[1])), Secret)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield
    httpd.shutdown()
    httpd.server_close()


def test_the_address_checked_is_the_address_connected_to(server, inside, monkeypatch) -> None:
    port = int(server.rsplit(":", 1)[1])
    resolver = Resolver(monkeypatch, {"rebind.test": ["127.0.0.1", "127.0.0.3"]})
    out = get(f"http://rebind.test:{port}/text")
    assert out.content["text"] == "hello wörld\n"
    assert resolver.lookups == ["rebind.test"]  # one lookup: the check's is the connection's


def test_every_redirect_is_checked_again(server, monkeypatch) -> None:
    port = server.rsplit(":", 1)[1]
    Resolver(monkeypatch, {"hop.test": ["127.0.0.1", "127.0.0.3"]})
    assert "loopback" in refused(f"http://hop.test:{port}/redirect")


def test_a_name_with_any_internal_address_is_denied(server, monkeypatch) -> None:
    port = server.rsplit(":", 1)[1]
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda host, port, *a, **k: [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", int(port))),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", int(port))),
        ],
    )
    assert "10.0.0.7" in refused(f"http://two.test:{port}/text")
