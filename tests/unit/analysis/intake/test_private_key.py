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
