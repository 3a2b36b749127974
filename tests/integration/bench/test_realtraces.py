"""The real-trace stream of the benchmarks: traces printed by running the buggy services, grouped as they should be.

Python and Node.js only (always on this machine and in CI); Java and Go run in `make bench`.
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

import pytest

from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.signature import fingerprint_event
from bench.programs import MARKER_ID, NODE, ROUTES
from bench.realtraces import capture, event, write_program

pytestmark = pytest.mark.integration


class TestCapture:
    def test_python_service_prints_one_real_traceback_per_route(self) -> None:
        """Every route of the Python service fails, in its own application file, with the request id in it."""
        traces = capture("python", "orders", 0)
        assert [t.route for t in traces] == list(ROUTES)
        for trace in traces:
            assert trace.text.startswith("Traceback (most recent call last):")
            assert '"/srv/app/orders/' in trace.text
            assert trace.chain and trace.chain[0]["stacktrace"][-1]["in_app"] is True
        assert MARKER_ID in traces[0].value

    def test_a_deploy_moves_the_application_lines(self) -> None:
        """The same route at the next deploy raises three lines further down its file."""
        before = capture("node", "catalog", 0)[0].text
        after = capture("node", "catalog", 1)[0].text
        assert "/app/src/catalog/service.js:13:" in before
        assert "/app/src/catalog/service.js:16:" in after

    def test_only_application_files_get_the_shift(self, tmp_path: Path) -> None:
        """`__SHIFT__` puts the deploy's blank lines above each application file, not the framework's."""
        write_program(NODE, tmp_path, "search", 2)
        assert (tmp_path / "src/search/service.js").read_text().startswith("\n" * 6 + "'use strict';")
        assert (tmp_path / "node_modules/kit/index.js").read_text().startswith("'use strict';")


class TestGrouping:
    def test_each_route_is_one_signature_across_deploys_and_ids(self) -> None:
        """Fresh ids and moved lines leave one fingerprint per (shape, route), and the routes differ."""
        rng = random.Random(3)
        fingerprints: dict[str, set[str]] = defaultdict(set)
        for deploy in range(2):
            for trace in capture("python", "orders", deploy) + capture("node", "catalog", deploy):
                for shape in ("native", "ecs") if trace.chain else ("otel", "ecs"):
                    line = event(rng, shape, "svc", "python", trace, "c" * 40, 1.7e9, 0).line
                    (decoded,) = decode_message(line, DecodeConfig())
                    key = f"{shape}:{trace.route}:{bool(trace.chain)}"
                    fingerprints[key].add(fingerprint_event(decoded).fingerprint)
        assert all(len(found) == 1 for found in fingerprints.values()), fingerprints
        assert len({next(iter(found)) for found in fingerprints.values()}) >= 2 * len(ROUTES)
