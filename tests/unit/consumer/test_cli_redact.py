"""`logagent redact`: each input line comes out as what the service lets leave of it."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from analysis.intake.decode import DecodeConfig
from analysis.intake.redact import Redactor
from consumer.cli import main
from consumer.cli.redact import redact_line
from tests.keys import python_trace, secret_lines

CONFIG = DecodeConfig()
REDACTOR = Redactor()
EVENT = orjson.dumps({"server_id": "shop", "timestamp": 1.0, "message": "login bob@example.com",
                      "tenant": "acme password=hunter2", "exception": {"type": "E", "value": "AKIAIOSFODNN7EXAMPLE"}})


class TestRedactLine:
    def test_a_json_event_comes_out_as_the_redacted_event(self) -> None:
        """Decoded and normalised, every field redacted, as one JSON object."""
        out = orjson.loads(redact_line(EVENT, CONFIG, REDACTOR))
        assert out["message"] == "login [REDACTED:email]"
        assert out["tenant"].startswith("acme password=[REDACTED:secret]~")
        assert out["exceptions"][0]["value"] == "[REDACTED:aws_access_key]"

    def test_other_lines_come_out_redacted_as_text(self) -> None:
        """Plain text, and JSON that is no event, are redacted as text; decided per line."""
        assert redact_line(b"Authorization: Bearer abcdef123456", CONFIG, REDACTOR) == (
            b"Authorization: Bearer [REDACTED:bearer]")
        assert redact_line(b'{"token": "x1"}', CONFIG, REDACTOR) == b'{"token": "[REDACTED:secret]"}'

    def test_an_event_no_json_writer_takes_comes_out_as_text_and_the_stream_goes_on(
            self, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
        """An OTLP intValue past 64 bits decodes, but orjson cannot write it: it stopped the command with a
        traceback, its later lines unwritten (attacker review). That line is redacted as text."""
        big = orjson.dumps({"resourceLogs": [{"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "s"}}]}, "scopeLogs": [{"logRecords": [
                {"body": {"stringValue": "boom bob@example.com"},
                 "attributes": [{"key": "n", "value": {"intValue": "18446744073709551616"}}]}]}]}]})
        path = tmp_path / "in.log"
        path.write_bytes(big + b"\nplain bob@example.com\n")
        assert main(["redact", str(path)]) == 0
        lines = capsysbinary.readouterr().out.splitlines()
        assert len(lines) == 2 and b"18446744073709551616" in lines[0] and b"bob@" not in lines[0]
        assert lines[1] == b"plain [REDACTED:email]"

    def test_json_nested_past_the_parser_comes_out_as_text(self) -> None:
        """A line of 100,000 brackets stopped the command with a RecursionError (fourth review)."""
        assert redact_line(b"[" * 100_000 + b"]" * 100_000, CONFIG, REDACTOR) == b"[" * 100_000 + b"]" * 100_000

    def test_json_is_redacted_as_what_its_escapes_spell(self) -> None:
        """Redacted as raw text, `bob\\u0040example.com`, `\\u001b[31m` and `\\u0020`-spaced cards passed the
        rules (second review): JSON that is no event comes out as JSON with every string redacted."""
        line = (b'{"msg": "login bob\\u0040example.com password=\\u001b[31mhunter2 card 4111\\u00201111\\u00201111'
                b'\\u00201111", "n": 18446744073709551616}')
        out = redact_line(line, CONFIG, REDACTOR)
        assert orjson.loads(out.replace(b"18446744073709551616", b"1")) == {
            "msg": "login [REDACTED:email] password=[REDACTED:secret] card [REDACTED:credit_card]", "n": 1}

    def test_the_command_prints_one_line_per_input_line(
            self, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
        """`logagent redact FILE` keeps the lines in order."""
        path = tmp_path / "in.log"
        path.write_bytes(EVENT + b"\nplain bob@example.com\n")
        assert main(["redact", str(path)]) == 0
        lines = capsysbinary.readouterr().out.splitlines()
        assert len(lines) == 2 and lines[1] == b"plain [REDACTED:email]"


class TestPrivateKeyBlocks:
    """A private key pasted as text spans lines, and every line of it goes, whatever tool wrote it."""

    def _run(self, text: str, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> list[str]:
        path = tmp_path / "in.log"
        path.write_text(text)
        assert main(["redact", str(path)]) == 0
        return capsysbinary.readouterr().out.decode().splitlines()

    def test_every_line_of_each_real_key_file_is_hidden(
            self, private_keys: dict[str, str], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
        """PEM (PKCS#8, encrypted, with RFC 1421 headers), OpenSSH, SSH2 and PuTTY v2/v3 files: each of their
        lines comes out as the placeholder, and the lines around them as usual, one output line per input line."""
        for name, key in private_keys.items():
            lines = self._run(f"loading key for bob@example.com\n{key}key loaded\n", tmp_path, capsysbinary)
            assert len(lines) == len(key.splitlines()) + 2, name
            assert lines[0] == "loading key for [REDACTED:email]", name
            assert set(lines[1:-1]) == {"[REDACTED:private_key]"}, name
            assert lines[-1] == "key loaded", name

    def test_a_key_in_a_real_traceback_goes_with_the_frames_kept(
            self, private_keys: dict[str, str], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
        """Python printed the key inside an exception message: its lines go, the traceback's frames stay."""
        for name in ("pkcs8 rsa", "ppk v3 encrypted"):
            trace = python_trace(private_keys[name], tmp_path)
            lines = self._run(trace, tmp_path, capsysbinary)
            out = "\n".join(lines)
            assert len(lines) == len(trace.splitlines()), name
            assert not [line for line in secret_lines(private_keys[name]) if line in out], name
            assert "Private-MAC" not in out and "Traceback (most recent call last):" in out, name
            assert 'in load\n    raise ValueError(' in out and "ValueError: bad key [REDACTED:private_key]" in out

    def test_an_indented_key_in_a_config_dump_goes(
            self, private_keys: dict[str, str], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
        """A YAML block scalar indents the key: the indented lines are the block's all the same."""
        key = private_keys["openssh ed25519"]
        indented = "".join(f"  {line}\n" for line in key.splitlines())
        lines = self._run(f"tls:\n  key: |\n{indented}  port: 8443\n", tmp_path, capsysbinary)
        assert lines[:2] == ["tls:", "  key: |"] and lines[-1] == "  port: 8443"
        assert set(lines[2:-1]) == {"  [REDACTED:private_key]"}

    def test_a_key_logged_a_line_per_record_goes_with_the_prefixes_kept(
            self, private_keys: dict[str, str], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
        """Each line of the key in a record of its own, behind a prefix whose time moves: every key line
        goes (the body's keep their prefixes), and the next record (not base64) is the stream's again."""
        for name in ("pkcs8 rsa", "ppk v3 encrypted", "openssh ed25519"):
            key = private_keys[name].splitlines()
            logged = "".join(f"2024-01-15T10:00:{i % 60:02d}.{i:03d}Z ERROR app: {line}\n"
                             for i, line in enumerate(key))
            lines = self._run(logged + "2024-01-15T10:01:00.000Z ERROR app: key rejected\n", tmp_path, capsysbinary)
            out = "\n".join(lines)
            assert len(lines) == len(key) + 1, name
            assert not [line for line in secret_lines(private_keys[name]) if line in out], (name, out)
            body = lines[1:len(key) - 1]
            assert {line.partition("Z ERROR app: ")[2] for line in body} == {"[REDACTED:private_key]"}, name
            assert lines[-1] == "2024-01-15T10:01:00.000Z ERROR app: key rejected", name

    def test_a_block_cut_short_gives_the_stream_back(
            self, private_keys: dict[str, str], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
        """A header whose body never comes hides only itself and its body: the next log line is the stream's."""
        key = private_keys["pkcs8 rsa"].splitlines()
        lines = self._run(f"{key[0]}\n{key[1]}\n2024-01-15 ERROR checkout failed for bob@example.com\n", tmp_path,
                          capsysbinary)
        assert lines == ["[REDACTED:private_key]", "[REDACTED:private_key]",
                         "2024-01-15 ERROR checkout failed for [REDACTED:email]"]

    def test_text_after_a_footer_is_redacted_as_usual(
            self, private_keys: dict[str, str], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
        """The footer's line keeps what follows the key, redacted."""
        key = private_keys["pkcs8 rsa"].rstrip("\n")
        lines = self._run(f"key={key} owner=bob@example.com\n", tmp_path, capsysbinary)
        assert lines[0] == "key=[REDACTED:private_key]"
        assert lines[-1] == "[REDACTED:private_key] owner=[REDACTED:email]"
