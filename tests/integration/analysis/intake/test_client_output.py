"""What HTTP and mail clients really print about a request carrying credentials: the credential goes, the
protocol's own words stay."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import smtplib
import socketserver
import subprocess
import threading
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from tests.redacting import redacted

PASSWORD = "Xk9vQ2mT7pLw"  # a test value


class TestNode:
    @pytest.fixture
    def node(self) -> str:
        found = shutil.which("node")
        assert found, "node is needed: the test runs Node's own url.parse"
        return found

    @pytest.mark.parametrize(("user", "password"), [("deploy", PASSWORD), ("deploy", "correct horse battery staple"),
                                                    ("deploy", "Tr0ub'4dor&3"), ("deploy", "Tr0ub'4\"dor"),
                                                    ("john doe", PASSWORD), ("", PASSWORD)])
    def test_url_parse_prints_the_user_information(self, node: str, user: str, password: str) -> None:
        """`auth: 'deploy:…'`, as `console.log` prints a parsed URL (and http's request options): decoded, in
        double quotes when it holds a single one, in backticks when it holds both."""
        url = f"https://{quote(user)}:{quote(password)}@registry.example.com/v2/"
        printed = subprocess.run([node, "-e", f"console.log(require('url').parse({url!r}))"],
                                 capture_output=True, text=True, check=True, timeout=60).stdout
        assert f"{user}:{password}" in printed
        out = redacted(printed, password)
        assert any(f"auth: {q}{user}:[REDACTED:secret]{q}" in out for q in "'\"`"), out
        assert "host: 'registry.example.com'" in out


class _Smtp(socketserver.StreamRequestHandler):
    """Just enough SMTP for a client to log in: it offers two mechanisms and takes any credential."""

    def handle(self) -> None:
        self.wfile.write(b"220 mail.test ESMTP\r\n")
        for line in self.rfile:
            command = line.split(b" ", 1)[0].upper().strip()
            if command == b"EHLO":
                self.wfile.write(b"250-mail.test\r\n250 AUTH PLAIN LOGIN\r\n")
            elif command == b"AUTH":
                self.wfile.write(b"235 2.7.0 Authentication successful\r\n")
            else:
                self.wfile.write(b"221 bye\r\n")
                return


@pytest.fixture
def smtp_port() -> Iterator[int]:
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Smtp) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield server.server_address[1]
        server.shutdown()


class TestSmtplib:
    def test_the_offered_mechanisms_stay_and_the_login_goes(self, smtp_port: int) -> None:
        printed = io.StringIO()
        with contextlib.redirect_stderr(printed), smtplib.SMTP("127.0.0.1", smtp_port, timeout=10) as client:
            client.set_debuglevel(1)
            client.login("bob@example.com", PASSWORD)
        out = redacted(printed.getvalue())
        assert out.count("AUTH PLAIN LOGIN") == 2  # the offer, as sent and as smtplib reads it
        assert "send: 'AUTH PLAIN [REDACTED:secret]" in out


class TestBotocoreBody:
    def test_json_in_a_json_string_in_a_bytes_repr(self) -> None:
        """botocore's DEBUG params print the request body as bytes: a Secrets Manager secret is JSON inside its
        JSON, so the inner quotes come out as `\\\\"`."""
        body = json.dumps({"Name": "db", "SecretString": json.dumps({"username": "app", "password": PASSWORD})})
        out = redacted(f"'body': {body.encode()!r}", PASSWORD)
        assert '\\\\": \\\\"app\\\\"' in out  # the user's name stays
