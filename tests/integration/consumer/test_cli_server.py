"""`logagent analyze` on events that name no server: the server comes from --server or the repository."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from analysis.report import Analysis
from demo.services import SampleService, build_sample_repos
from demo.stream import SampleStream, build_stream
from tests.integration.consumer.test_cli import logagent

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SampleService]:
    return build_sample_repos(tmp_path_factory.mktemp("samples"))


@pytest.fixture(scope="module")
def stream(services: dict[str, SampleService]) -> SampleStream:
    return build_stream(services, n_events=300, seed=5)


def _bare_trace_event(stream: SampleStream) -> tuple[bytes, str]:
    """A real Java trace logged as the message of an event with no server field, and its bug."""
    message = next(m for m in stream.messages if m.shape == "ecs" and m.bug == "coupon-required")
    trace = orjson.loads(message.value)["error.stack_trace"]
    return orjson.dumps({"@timestamp": "2024-05-02T10:14:03Z", "message": trace}), message.bug


def _analyze(event: bytes, *args: str) -> Analysis:
    proc = logagent("analyze", *args, "--offline", stdin=event)
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    return Analysis.model_validate_json(line)


class TestAnalyzeServer:
    def test_the_repository_name_stands_in_for_a_missing_server(self, services: dict[str, SampleService],
                                                                stream: SampleStream) -> None:
        """An event naming no server is analysed as the repository's server, and its trace is read."""
        checkout = services["checkout-service"]
        event, bug = _bare_trace_event(stream)
        analysis = _analyze(event, "--repo", str(checkout.repo))
        assert analysis.cluster.server == Path(checkout.repo).resolve().name
        assert analysis.culprit is not None and analysis.culprit.path == checkout.bug(bug).culprit_path

    def test_an_explicit_server_wins(self, services: dict[str, SampleService], stream: SampleStream) -> None:
        """--server names the server whatever the event or the repository say."""
        checkout = services["checkout-service"]
        event, _ = _bare_trace_event(stream)
        assert _analyze(event, "--repo", str(checkout.repo), "--server", "checkout").cluster.server == "checkout"
        named = orjson.dumps({**orjson.loads(event), "server_id": "from-event"})
        assert _analyze(named, "--repo", str(checkout.repo)).cluster.server == "from-event"
        assert _analyze(named, "--repo", str(checkout.repo), "--server", "cli").cluster.server == "cli"
