"""Sentry's grouping fixtures as data: each case's input payload and what its snapshot says was hashed.

A snapshot (`snapshots/<case>.pysnap`) is a YAML-like tree of grouping components. Nodes marked `*`
contribute to the hash; quoted strings under them are the values Sentry hashed, after its own
normalisation (`<auto>` stands for a part it masked). Two layouts exist: the newer one lists only the
contributing variants, the older one lists every variant with `hash: null` for those that do not apply.
This module reads both and returns, per case, the contributing frames with their hashed values.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EMPTY_HASH = "d41d8cd98f00b204e9800998ecf8427e"
"""MD5 of nothing: Sentry's hash for an event that left nothing to group on."""

_NODE = re.compile(r"^([\w-]+)(\*)?(?: \((.*)\))?$")
_LEAF = re.compile(r'^(?:"(?:[^"\\]|\\.)*"|-?\d+)$')


@dataclass
class Node:
    """One component of a snapshot tree."""

    name: str
    contributes: bool
    children: list[Node] = field(default_factory=list)
    values: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SentryFrame:
    """A frame Sentry hashed: which exception it belongs to (0 = first listed) and its hashed values."""

    exception: int
    values: dict[str, str]


@dataclass(frozen=True)
class Case:
    """One fixture: its payload, Sentry's group hash, the variant that produced it and its frames."""

    name: str
    payload: dict[str, Any]
    group_hash: str
    variant: str
    frames: tuple[SentryFrame, ...]

    @property
    def built_in_fingerprint(self) -> bool:
        """Grouped by one of Sentry's built-in fingerprint rules, not by its stack or message."""
        return self.variant.replace("_", "-") == "built-in-fingerprint"


def load_cases(root: Path) -> list[Case]:
    """Every case of `MANIFEST.tsv` under `root`, in manifest order."""
    with (root / "MANIFEST.tsv").open(newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    cases = []
    for row in rows:
        name = row["case"]
        payload = json.loads((root / "grouping_inputs" / f"{name}.json").read_text())
        snapshot = (root / "snapshots" / f"{name.replace('-', '_')}.pysnap").read_text()
        variant, tree = _first_contributing_variant(snapshot)
        cases.append(Case(name, payload, row["group_hash"], variant, tuple(_frames(tree))))
    return cases


def _first_contributing_variant(snapshot: str) -> tuple[str, Node]:
    body = snapshot.split("---\n", 2)[2]
    lines = [line for line in body.splitlines() if line.strip()]
    if "contributing variants:" in lines:
        return _new_layout(lines[lines.index("contributing variants:") + 1 :])
    return _old_layout(lines)


def _new_layout(lines: list[str]) -> tuple[str, Node]:
    """`  app*` / `    hash: …` / `    root_component:` (or `component:`) / the tree, per variant."""
    name, tree_lines, in_tree = "", [], False
    for line in lines:
        indent, text = len(line) - len(line.lstrip()), line.strip()
        if indent == 2:
            if name:
                break  # only the first contributing variant is the group's hash
            name = text.rstrip("*")
        elif indent == 4:
            in_tree = text in ("root_component:", "component:")
        elif in_tree:
            tree_lines.append((indent, text))
    return name, _tree(tree_lines)


def _old_layout(lines: list[str]) -> tuple[str, Node]:
    """`app:` / `  hash: null|"…"` / `  component:` / the tree; the first variant with a hash counts."""
    variants: list[tuple[str, bool, list[tuple[int, str]]]] = []
    in_tree = False
    for line in lines:
        indent, text = len(line) - len(line.lstrip()), line.strip()
        if indent == 0 and text.endswith(":") and not text.startswith("-"):
            variants.append((text[:-1], False, []))
            in_tree = False
        elif variants and indent == 2:
            if text.startswith("hash:"):
                name, _, tree = variants[-1]
                variants[-1] = (name, text != "hash: null", tree)
            in_tree = text == "component:"
        elif variants and in_tree:
            variants[-1][2].append((indent, text))
    for name, hashed, tree_lines in variants:
        if hashed:
            return name, _tree(tree_lines)
    return "", Node("", False)


def _tree(lines: list[tuple[int, str]]) -> Node:
    root = Node("<root>", True)
    stack: list[tuple[int, Node]] = [(-1, root)]
    for indent, text in lines:
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if _LEAF.fullmatch(text):
            parent.values.append(json.loads(text) if text.startswith('"') else text)
            continue
        match = _NODE.match(text)
        if match is None:
            continue  # hints and metadata lines that are not components
        node = Node(match.group(1), bool(match.group(2)))
        parent.children.append(node)
        stack.append((indent, node))
    return root


def _frames(tree: Node) -> list[SentryFrame]:
    """Contributing frames (and a template location, which Sentry hashes like one), in tree order."""
    frames: list[SentryFrame] = []
    exceptions = -1

    def walk(node: Node, contributing: bool, exception: int) -> None:
        nonlocal exceptions
        contributing = contributing and node.contributes
        if node.name == "exception":
            exceptions += 1
            exception = exceptions
        if node.name in ("frame", "template"):
            if contributing:
                values = {child.name: child.values[0] for child in node.children if child.contributes and child.values}
                frames.append(SentryFrame(max(exception, 0), values))
            return
        for child in node.children:
            walk(child, contributing, exception)

    walk(tree, True, -1)
    return frames
