"""Private key blocks go whole, from real key files (openssl, ssh-keygen, puttygen), wherever they sit."""

from __future__ import annotations

import orjson
import pytest

from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.private_key import KeyBlockLines, redact_private_keys
from analysis.intake.redact import RedactionConfig, Redactor, redact_event
from tests.keys import python_trace, secret_lines

REDACTOR = Redactor()


@pytest.fixture(scope="module")
def traces(private_keys: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Per key, the traceback real Python printed when an exception message carried it."""
    folder = tmp_path_factory.mktemp("trace")
    return {name: python_trace(key, folder) for name, key in private_keys.items()}


def _leaks(key: str, out: str) -> list[str]:
    unescaped = out.replace("\\n", "\n")
    return [line for line in secret_lines(key) if line in out or line in unescaped]


class TestWholeTexts:
    def test_each_key_file_goes_whole_as_plain_text(self, private_keys: dict[str, str]) -> None:
        """The file as the tool wrote it, with log text around it: one placeholder, the text kept."""
        for name, key in private_keys.items():
            assert REDACTOR.redact(f"loaded\n{key}done") == "loaded\n[REDACTED:private_key]\ndone", name

    def test_each_key_goes_in_every_shape_of_json_event(self, private_keys: dict[str, str],
                                                        traces: dict[str, str]) -> None:
        """Decoded from a message, an exception value or a text trace in any field, as the service keeps it;
        JSON that is no event, as text with its line breaks escaped."""
        for name, key in private_keys.items():
            events = {
                "native message": {"server_id": "s", "timestamp": 1.0, "message": f"loaded {key}"},
                "native value": {"server_id": "s", "timestamp": 1.0, "message": "x",
                                 "exception": {"type": "ValueError", "value": key, "stacktrace": []}},
                "ecs trace": {"service.name": "s", "@timestamp": "2024-01-15T10:22:33Z", "message": "boom",
                              "error.stack_trace": traces[name]},
                "logback trace": {"server_id": "s", "@timestamp": "2024-01-15T10:22:33Z", "logger_name": "app",
                                  "level": "ERROR", "message": "boom", "stack_trace": traces[name]},
                "trace as message": {"server_id": "s", "timestamp": 1.0, "message": traces[name]},
            }
            for shape, event in events.items():
                decoded = decode_message(orjson.dumps(event), DecodeConfig())
                out = orjson.dumps([redact_event(one, REDACTOR) for one in decoded]).decode()
                assert not _leaks(key, out) and "Private-MAC" not in out, (name, shape)
                assert "[REDACTED:private_key]" in out, (name, shape)
            out = REDACTOR.redact(orjson.dumps({"note": key}).decode())  # JSON that is no event, as text
            assert out == '{"note":"[REDACTED:private_key]\\n"}', name

    def test_a_real_traceback_keeps_its_frames(self, traces: dict[str, str]) -> None:
        """Only the key goes from a multi-line trace: its frames and exception type stay."""
        out = REDACTOR.redact(traces["ppk v3"])
        assert out.startswith("Traceback (most recent call last):\n") and "raise ValueError('bad key ' + key)" in out
        assert "ValueError: bad key [REDACTED:private_key]" in out

    def test_keys_are_kept_when_their_kind_is_not_redacted(self, private_keys: dict[str, str]) -> None:
        """Without the private_key kind there is no block to follow across lines."""
        redactor = Redactor(RedactionConfig(kinds=("email",)))
        assert redactor.key_block_lines() is None
        assert REDACTOR.key_block_lines() is not None


class TestKeyBlockLines:
    """A block redacted a line at a time, as `logagent redact` reads a stream."""

    def test_the_lines_of_a_block_after_its_first_stand_as_the_placeholder(self, private_keys: dict[str, str]) -> None:
        for name, key in private_keys.items():
            lines = KeyBlockLines(REDACTOR.redact)
            first, *rest = key.splitlines()
            assert lines.redact(first) is None, name  # the caller redacts the opening line itself
            assert redact_private_keys(first) == "[REDACTED:private_key]", name
            assert [lines.redact(line) for line in rest] == ["[REDACTED:private_key]"] * len(rest), name
            assert lines.redact("after the key") is None, name

    def test_a_line_that_opens_and_closes_a_block_opens_nothing(self, private_keys: dict[str, str]) -> None:
        """A JSON-escaped key on one line is whole on that line: the next line is the stream's."""
        lines = KeyBlockLines(REDACTOR.redact)
        assert lines.redact(orjson.dumps({"key": private_keys["pkcs8 rsa"]}).decode()) is None
        assert lines.redact("AAAA") is None


def _pem_keys(private_keys: dict[str, str]) -> dict[str, str]:
    """The keys with a `-----BEGIN ... PRIVATE KEY-----` header (openssl's and ssh-keygen's)."""
    return {name: key for name, key in private_keys.items() if key.startswith("-----BEGIN ")}


class TestMarkersCutShort:
    """A marker with no dashes of its own, or a header or footer cut before its dashes, never lets the key
    beside it through."""

    def _assert_hidden(self, key: str, text: str, name: str) -> None:
        assert not _leaks(key, REDACTOR.redact(text)), name
        event = {"server_id": "s", "timestamp": 1.0, "message": text}
        decoded = decode_message(orjson.dumps(event), DecodeConfig())
        out = orjson.dumps([redact_event(one, REDACTOR) for one in decoded]).decode()
        assert not _leaks(key, out) and "[REDACTED:private_key]" in out, name
        assert not _leaks(key, REDACTOR.redact(orjson.dumps({"note": text}).decode())), name  # on one line

    def test_a_bare_begin_before_a_key(self, private_keys: dict[str, str]) -> None:
        """A parser's error quoting the marker it choked on, then the key."""
        for name, key in _pem_keys(private_keys).items():
            text = f"PEM parse failed near '-----BEGIN ' in:\n{key}"
            self._assert_hidden(key, text, name)
            assert REDACTOR.redact(text).startswith("PEM parse failed near '-----BEGIN ' in:\n"), name

    def test_a_certificate_header_cut_short_before_a_key(self, private_keys: dict[str, str]) -> None:
        for name, key in _pem_keys(private_keys).items():
            self._assert_hidden(key, f"-----BEGIN CERTIFICATE\n{key}", name)
            self._assert_hidden(key, f"---- BEGIN SSH2 PUBLIC KEY\n{key}", name)

    def test_a_header_without_its_closing_dashes(self, private_keys: dict[str, str]) -> None:
        for name, key in _pem_keys(private_keys).items():
            header, rest = key.split("\n", 1)
            self._assert_hidden(key, f"loaded\n{header.rstrip('-')}\n{rest}", name)

    def test_a_footer_without_its_closing_dashes_before_another_key(self, private_keys: dict[str, str]) -> None:
        """The footer ends at its line's end: the next block's marker is not taken as its dashes."""
        first, second = private_keys["pkcs8 rsa"], private_keys["rsa with headers"]
        cut = first.rstrip("\n").rstrip("-") + "\n"
        self._assert_hidden(second, f"{cut}{second}done", "second key")
        assert REDACTOR.redact(f"{cut}{second}done") == "[REDACTED:private_key]\n[REDACTED:private_key]\ndone"

    def test_a_header_without_dashes_opens_a_block_line_by_line(self, private_keys: dict[str, str]) -> None:
        """In a stream the header cut before its dashes is a line of its own: the body after it goes."""
        for name, key in _pem_keys(private_keys).items():
            first, *rest = key.splitlines()
            lines = KeyBlockLines(REDACTOR.redact)
            assert lines.redact(first.rstrip("-")) is None, name
            assert REDACTOR.redact(first.rstrip("-")) == "[REDACTED:private_key]", name
            assert [lines.redact(line) for line in rest] == ["[REDACTED:private_key]"] * len(rest), name

    def test_markers_of_other_blocks_are_kept(self) -> None:
        """A certificate, a bare marker and a header that only names a private key stay as they were."""
        for text in ("-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n",
                     "PEM parse failed near '-----BEGIN ' at line 3", "expected '-----BEGIN RSA PRIVATE KEY' here"):
            assert redact_private_keys(text) == text
