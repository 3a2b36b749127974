"""`python -m demo.produce`: a file's lines into a topic of a real tansu broker, and its one-line errors."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from demo.broker import EmbeddedBroker
from demo.produce import MAX_LINE_BYTES, main
from tests.conftest import KafkaIO, TopicFactory
from tests.paths import PROJECT_ROOT
from tests.ports import free_port

pytestmark = pytest.mark.integration


def test_each_line_is_one_message_in_order(tansu: EmbeddedBroker, topic_factory: TopicFactory, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    topic = topic_factory("produce")
    lines = [b'{"message": "one"}', b"not json at all", b'{"message": "tw\\u00f6"}', b'{"message": "crlf"}']
    path = tmp_path / "events.jsonl"
    # Blank lines are skipped; a CRLF ending goes with the line break; the last line has none.
    path.write_bytes(lines[0] + b"\n\n" + lines[1] + b"\n   \n" + lines[2] + b"\n" + lines[3] + b"\r\n" + b"\n")

    assert main([str(path), "--topic", topic, "--bootstrap-servers", tansu.bootstrap_servers]) == 0

    records = asyncio.run(KafkaIO(tansu.bootstrap_servers).read_all(topic))
    assert [(r.key, r.value) for r in sorted(records, key=lambda r: r.offset)] == [(None, line) for line in lines]
    out = capsys.readouterr().out
    assert out == f"4 messages sent to {topic} on {tansu.bootstrap_servers} (3 blank lines skipped)\n"


def test_a_file_it_cannot_read_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "missing.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read" in err and "missing.jsonl" in err


def test_a_broker_that_is_not_there_exits_1_with_one_line(tmp_path: Path) -> None:
    """As a user runs it: a process of its own, whose stderr holds that line alone (no client log lines)."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"message": "one"}\n')
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    done = subprocess.run([sys.executable, "-m", "demo.produce", str(path), "--bootstrap-servers", address],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"demo.produce: {address} did not take every "
                                                                    "message (0 of 1 acknowledged): "), done.stderr
    assert done.stdout == ""


def test_a_topic_that_does_not_exist_is_not_created_and_exits_1(tansu: EmbeddedBroker, kafka_io: KafkaIO,
                                                                tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """tansu creates a topic at its first produce: a mistyped name must fail before that, not feed nothing."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"message": "one"}\n')
    topic = f"mistyped-{uuid.uuid4().hex[:8]}"
    assert main([str(path), "--topic", topic, "--bootstrap-servers", tansu.bootstrap_servers]) == 1
    err = capsys.readouterr().err
    assert err == (f"demo.produce: {tansu.bootstrap_servers} did not take every message (0 of 1 acknowledged): "
                   f"no topic {topic!r} there (create it first)\n")

    assert topic not in asyncio.run(kafka_io.topics())


def test_a_line_longer_than_a_message_may_be_sends_nothing_and_exits_2(
        tansu: EmbeddedBroker, kafka_io: KafkaIO, topic_factory: TopicFactory, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Checked before anything is sent, so a fixed file can be sent again without duplicates."""
    topic = topic_factory("produce-long")
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"n": 1}\n{"n": 2}\n' + b"x" * (MAX_LINE_BYTES + 1) + b"\n{\"n\": 3}\n")
    assert main([str(path), "--topic", topic, "--bootstrap-servers", tansu.bootstrap_servers]) == 2
    assert capsys.readouterr().err == (f"demo.produce: line 3 of {path} is over {MAX_LINE_BYTES:,} bytes, the most "
                                       "one message may be here\n")
    assert asyncio.run(kafka_io.read_all(topic)) == []


def test_a_file_without_line_breaks_is_not_read_past_one_message(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """/dev/zero: refused at its first line, not read into memory."""
    assert main(["/dev/zero", "--bootstrap-servers", "127.0.0.1:1"]) == 2
    assert "line 1 of /dev/zero is over" in capsys.readouterr().err


@pytest.mark.parametrize("address", ["127.0.0.1:notaport", "127.0.0.1:65536", "127.0.0.1:-1", ":9092", ""])
def test_a_malformed_address_is_refused_before_anything_is_read(address: str, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Not a client error, nor aiokafka's default port in place of a wrong one (`:-1`)."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"n": 1}\n')
    with pytest.raises(SystemExit) as stopped:
        main([str(path), "--bootstrap-servers", address])
    assert stopped.value.code == 2
    assert "is not HOST:PORT with a port from 1 to 65535" in capsys.readouterr().err


def test_ctrl_c_exits_130_with_one_line(tmp_path: Path) -> None:
    """Reading a FIFO whose writer sends nothing: Ctrl-C ends it with a line saying how many were
    acknowledged."""
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    process = subprocess.Popen([sys.executable, "-m", "demo.produce", str(fifo), "--bootstrap-servers", "127.0.0.1:1"],
                               cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while True:  # a writer's open succeeds once the reader has the FIFO open
        try:
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            assert time.monotonic() < deadline, "demo.produce never opened the FIFO"
            time.sleep(0.05)
    try:
        time.sleep(0.2)  # into its read
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        os.close(writer)
    assert process.returncode == 130, err
    assert (out, err) == ("", "demo.produce: interrupted; 0 messages acknowledged\n")
