"""`helm test`: every replica in TARGETS (space-separated base URLs) answers /readyz 200 and serves /metrics.

Run by the chart's test pod with the service's own image; it prints one line per replica and exits 1 on
the first one that fails, naming it and why.
"""

import json
import os
import sys
import urllib.error
import urllib.request


def check(base: str) -> str:
    """An empty string when `base` is ready and serves Log Agent metrics, else what is wrong."""
    if not base.startswith(("http://", "https://")):
        return f"{base} is not an http(s) URL"
    try:
        with urllib.request.urlopen(base + "/readyz", timeout=5) as response:  # noqa: S310 - scheme checked above
            ready = json.loads(response.read())
        with urllib.request.urlopen(base + "/metrics", timeout=5) as response:  # noqa: S310 - scheme checked above
            metrics = response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return f"{error.url} answered {error.code}: {error.read()[:300].decode('utf-8', 'replace')}"
    except OSError as error:
        return f"{base} unreachable: {error}"
    if not ready.get("ready"):
        return f"{base}/readyz says not ready: {ready.get('failing')}"
    if "logagent_build_info" not in metrics:
        return f"{base}/metrics serves no logagent_build_info"
    return ""


def main() -> int:
    targets = os.environ.get("TARGETS", "").split()
    if not targets:
        print("no replica to check (TARGETS is empty: replicaCount 0?)")
        return 1
    for base in targets:
        problem = check(base)
        print(f"{base}: {problem or 'ready, metrics served'}")
        if problem:
            return 1
    return 0


sys.exit(main())
