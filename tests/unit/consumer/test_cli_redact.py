"""`logagent redact`: each input line comes out as what the service lets leave of it."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from analysis.intake.decode import DecodeConfig
from analysis.intake.redact import Redactor
from consumer.cli import main
from consumer.cli.redact import redact_line

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

    def test_the_command_prints_one_line_per_input_line(
            self, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
        """`logagent redact FILE` keeps the lines in order."""
        path = tmp_path / "in.log"
        path.write_bytes(EVENT + b"\nplain bob@example.com\n")
        assert main(["redact", str(path)]) == 0
        lines = capsysbinary.readouterr().out.splitlines()
        assert len(lines) == 2 and lines[1] == b"plain [REDACTED:email]"
