"""The operability endpoint over real HTTP: /metrics as Prometheus reads it, probes as the kubelet does."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.parser import text_string_to_metric_families

from consumer.http import (
    IDLE_TIMEOUT_S,
    MAX_CONNECTION_S,
    MAX_CONNECTIONS,
    HealthSnapshot,
    HealthState,
    HttpEndpoint,
    degradations,
    readiness_checks,
    serve_http,
)
from consumer.metrics import Metrics
from tests.conftest import tool
from tests.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration

_ROOT = PROJECT_ROOT


def _populate(metrics: Metrics) -> set[str]:
    """Give every metric of `Metrics` one sample; return the metric names populated."""
    names: set[str] = set()
    for metric in vars(metrics).values():
        if not isinstance(metric, Counter | Gauge | Histogram):
            continue
        labelnames = metric._labelnames
        child = metric.labels(*(f"{name}-a" for name in labelnames)) if labelnames else metric
        if isinstance(child, Histogram):
            child.observe(1.5)
        elif isinstance(child, Gauge):
            child.set(2)
        else:
            child.inc(3)
        names.add(metric._name)
    return names


def _get(endpoint: HttpEndpoint, path: str, accept: str | None = None) -> tuple[int, str, bytes]:
    """GET a path; return status, content type and body (error statuses included)."""
    connection = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=5)
    try:
        connection.request("GET", path, headers={"Accept": accept} if accept else {})
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        connection.close()


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def health() -> HealthState:
    return HealthState()


@pytest.fixture
def endpoint(metrics: Metrics, health: HealthState) -> Iterator[HttpEndpoint]:
    with serve_http("127.0.0.1", 0, metrics, health) as running:
        yield running


class TestMetricsEndpoint:
    def test_scrape_passes_promtool_check_metrics(self, endpoint: HttpEndpoint, metrics: Metrics) -> None:
        """A scrape with every metric populated is accepted by `promtool check metrics` without a lint."""
        populated = _populate(metrics)
        status, content_type, body = _get(endpoint, "/metrics")
        assert status == 200
        assert content_type.startswith("text/plain; version=0.0.4")
        families = {family.name for family in text_string_to_metric_families(body.decode())}
        assert populated <= families, f"not exported: {sorted(populated - families)}"
        checked = subprocess.run(
            [tool("promtool"), "check", "metrics"], input=body, capture_output=True, timeout=60
        )
        assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()
        assert checked.stdout.strip() == b"" and checked.stderr.strip() == b""

    def test_scrape_shows_the_injected_registry_values(
        self, endpoint: HttpEndpoint, metrics: Metrics
    ) -> None:
        """Values set on the injected registry are what the scrape reports, not another registry's."""
        metrics.dlq.labels("not_json").inc(7)
        metrics.open_bursts.set(4)
        _, _, body = _get(endpoint, "/metrics")
        text = body.decode()
        assert 'logagent_dlq_total{reason="not_json"} 7.0' in text
        assert "logagent_open_bursts 4.0" in text
        assert "python_gc_objects_collected_total" not in text  # the default registry is not served

    def test_counters_export_no_created_series(self, endpoint: HttpEndpoint, metrics: Metrics) -> None:
        """Counters and histograms come without `_created` twins, in both exposition formats."""
        _populate(metrics)
        for accept in (None, "application/openmetrics-text"):
            text = _get(endpoint, "/metrics", accept=accept)[2].decode()
            assert "logagent_dlq_total" in text
            assert "_created" not in text, accept

    def test_openmetrics_is_served_when_asked_for(self, endpoint: HttpEndpoint) -> None:
        """A Prometheus that asks for OpenMetrics gets it, terminated by `# EOF`."""
        status, content_type, body = _get(endpoint, "/metrics", accept="application/openmetrics-text")
        assert status == 200
        assert content_type.startswith("application/openmetrics-text")
        assert body.rstrip().endswith(b"# EOF")


class TestProbes:
    def test_livez_answers_while_the_process_runs(self, endpoint: HttpEndpoint) -> None:
        """/livez is 200 even when nothing is ready yet: liveness never depends on Kafka or Ollama."""
        status, _, body = _get(endpoint, "/livez")
        assert (status, body) == (200, b"ok\n")

    def test_readyz_names_every_failing_check_until_ready(
        self, endpoint: HttpEndpoint, health: HealthState
    ) -> None:
        """/readyz is 503 listing the failing checks until the store is open and the broker answered; owning
        no partition never makes a replica unready (it is a standby for the next rebalance)."""
        status, content_type, body = _get(endpoint, "/readyz")
        assert (status, content_type) == (503, "application/json")
        assert json.loads(body)["failing"] == ["broker_reachable", "store_open"]
        health.set_store_open(True)
        status, _, body = _get(endpoint, "/readyz")
        assert status == 503 and json.loads(body)["failing"] == ["broker_reachable"]
        health.broker_answered()
        status, _, body = _get(endpoint, "/readyz")
        assert status == 200 and json.loads(body) == {
            "ready": True,
            "failing": [],
            "checks": {"store_open": True, "broker_reachable": True},
            "degraded": [],
            "partitions": 0,
        }
        health.set_partitions(2)
        assert json.loads(_get(endpoint, "/readyz")[2])["partitions"] == 2

    def test_ollama_down_is_ready_and_says_degraded(self, metrics: Metrics) -> None:
        """With an LLM configured but unreachable the replica stays ready (it answers heuristically) and
        /readyz names the degradation; once Ollama answers it is gone."""
        health = HealthState(llm_configured=True)
        health.set_store_open(True)
        health.broker_answered()
        with serve_http("127.0.0.1", 0, metrics, health) as endpoint:
            status, _, body = _get(endpoint, "/readyz")
            assert status == 200 and json.loads(body)["degraded"] == ["ollama_unreachable"]
            health.set_ollama_reachable(True)
            assert json.loads(_get(endpoint, "/readyz")[2])["degraded"] == []

    def test_broker_silence_past_the_grace_period_is_unready(self, metrics: Metrics) -> None:
        """A broker that stopped answering keeps the replica ready within the grace period, not after it."""
        now = [100.0]
        health = HealthState(broker_grace_s=60, clock=lambda: now[0])
        health.set_store_open(True)
        health.broker_answered()
        with serve_http("127.0.0.1", 0, metrics, health) as endpoint:
            now[0] += 59
            assert _get(endpoint, "/readyz")[0] == 200
            now[0] += 2
            status, _, body = _get(endpoint, "/readyz")
            assert status == 503 and json.loads(body)["failing"] == ["broker_reachable"]
            health.broker_answered()
            assert _get(endpoint, "/readyz")[0] == 200

    def test_livez_fails_once_the_main_loop_is_silent_past_the_limit(self, metrics: Metrics) -> None:
        """After its first turn the loop must beat within `stall_after_s`; past it /livez is 503, and a new
        beat, or the loop stopping for shutdown, makes it live again."""
        now = [1000.0]
        health = HealthState(stall_after_s=5.0, clock=lambda: now[0])
        with serve_http("127.0.0.1", 0, metrics, health) as endpoint:
            assert _get(endpoint, "/livez")[0] == 200  # not started yet: start-up is the startup probe's
            health.beat()
            now[0] += 5.0
            assert _get(endpoint, "/livez")[0] == 200
            now[0] += 2.5
            status, _, body = _get(endpoint, "/livez")
            assert status == 503 and body == b"main loop stalled: no progress for 8s\n"
            health.beat()
            assert _get(endpoint, "/livez")[0] == 200
            now[0] += 60
            health.loop_stopped()
            assert _get(endpoint, "/livez")[0] == 200

    def test_head_answers_as_get_without_a_body(self, endpoint: HttpEndpoint) -> None:
        """A trial's `curl -I /metrics` read `501 Unsupported method ('HEAD')`."""
        for path in ("/metrics", "/livez", "/readyz"):
            connection = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=5)
            try:
                connection.request("HEAD", path)
                reply = connection.getresponse()
                assert reply.status == _get(endpoint, path)[0] and reply.read() == b"", path
                assert int(reply.headers["Content-Length"]) > 0, path
            finally:
                connection.close()

    def test_unknown_path_is_404(self, endpoint: HttpEndpoint) -> None:
        """Only the three documented paths answer."""
        status, _, _ = _get(endpoint, "/admin")
        assert status == 404

    def test_a_stalled_client_does_not_block_the_probes(self, endpoint: HttpEndpoint) -> None:
        """A connection that never sends its request does not keep /livez from answering."""
        with socket.create_connection(("127.0.0.1", endpoint.port), timeout=5) as stalled:
            stalled.sendall(b"GET /metrics HTTP/1.1\r\n")  # headers never finished
            status, _, _ = _get(endpoint, "/livez")
        assert status == 200


class TestLifecycle:
    def test_port_zero_binds_a_free_port_and_close_releases_it(self, metrics: Metrics) -> None:
        """Port 0 picks a real port; after close() nothing listens there and a second close() is harmless."""
        endpoint = serve_http("127.0.0.1", 0, metrics, HealthState())
        assert endpoint.port > 0
        assert _get(endpoint, "/livez")[0] == 200
        endpoint.close()
        endpoint.close()
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", endpoint.port), timeout=2).close()


class TestReadinessChecks:
    def test_ready_means_store_open_and_broker_reachable(self) -> None:
        """Either of the two checks alone makes the replica unready; partitions and Ollama never do."""
        ready = HealthSnapshot(store_open=True, broker_reachable=True, partitions=0, llm_configured=True,
                               ollama_reachable=False)
        assert all(readiness_checks(ready).values())
        assert degradations(ready) == ["ollama_unreachable"]
        for field in ("store_open", "broker_reachable"):
            snapshot = HealthSnapshot(**{**ready.__dict__, field: False})
            assert not all(readiness_checks(snapshot).values()), field
        heuristic = HealthSnapshot(store_open=True, broker_reachable=True, llm_configured=False)
        assert degradations(heuristic) == []


class TestSilentClients:
    def test_silent_connections_hold_no_more_than_the_cap_and_are_dropped(self, metrics: Metrics) -> None:
        """A client that connects and says nothing (slowloris) held a thread for ever, with no bound: now
        at most MAX_CONNECTIONS are served at once, a newer one ending the oldest, each silent one is closed
        after IDLE_TIMEOUT_S, and a probe is answered while every slot is taken."""
        health = HealthState()
        with serve_http("127.0.0.1", 0, metrics, health) as endpoint:
            before = threading.active_count()
            sockets = [socket.create_connection(("127.0.0.1", endpoint.port)) for _ in range(MAX_CONNECTIONS + 20)]
            try:
                time.sleep(0.5)
                assert threading.active_count() - before <= MAX_CONNECTIONS + 1
                for oldest in sockets[:20]:  # ended by the newer ones
                    oldest.settimeout(2)
                    assert oldest.recv(1) == b""
                assert _get(endpoint, "/livez")[0] == 200  # every slot held: the probe ends the oldest
                held = sockets[-1]
                held.settimeout(IDLE_TIMEOUT_S + 3)
                started = time.monotonic()
                reply = held.recv(4096)  # the server gives up on it: a 408 or a bare close
                assert reply == b"" or reply.startswith(b"HTTP/1."), reply
                assert time.monotonic() - started <= IDLE_TIMEOUT_S + 2
            finally:
                for client in sockets:
                    client.close()

    def test_a_client_trickling_bytes_is_cut_off_at_the_connection_limit(self, metrics: Metrics) -> None:
        """A byte every second resets the idle timeout: the connection ends at MAX_CONNECTION_S all the same,
        so a few dozen tricklers cannot hold every slot and fail the kubelet's probes for ever."""
        with serve_http("127.0.0.1", 0, metrics, HealthState()) as endpoint:
            client = socket.create_connection(("127.0.0.1", endpoint.port))
            started = time.monotonic()
            try:
                with contextlib.suppress(OSError):  # the server hangs up: a reset or a broken pipe
                    for char in b"GET /livez HTTP/1.1\r\nX-Slow: " + b"a" * 100:
                        client.sendall(bytes([char]))
                        time.sleep(1.0)
                        if time.monotonic() - started > MAX_CONNECTION_S + 5:
                            break
                client.settimeout(2)
                with contextlib.suppress(OSError):
                    client.recv(4096)
                assert time.monotonic() - started < MAX_CONNECTION_S + 4
            finally:
                client.close()
            assert _get(endpoint, "/livez")[0] == 200
