"""The documentation says what the program does: every flag of `ocl-reconcile --help` and of each
`ocl-reconcile COMMAND --help` (read from the argparse parser at test time, so a new command or
flag is held to it the day it lands) appears in the usage block of docs/admin.md, "Command
reference", and that block names no flag the program lacks; every relative link of README.md,
CHANGELOG.md and docs/*.md reaches a file, and a heading there when it names one (anchors as
GitHub makes them from headings); every path of this repository the docs quote in backticks
exists."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from reconcile import cli
from tests.support import factory as F

DOCS = [F.ROOT / "README.md", F.ROOT / "CHANGELOG.md", *sorted((F.ROOT / "docs").glob("*.md"))]
USAGE_DOC, USAGE_HEADING = F.ROOT / "docs" / "admin.md", "## Command reference"
_FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def options() -> dict[str, list[str]]:
    """Option strings per command ("" for the program itself), --help left out."""
    parser = cli._parser()
    out: dict[str, list[str]] = {"": []}

    def flags(p: argparse.ArgumentParser) -> list[str]:
        return [s for a in p._actions if not isinstance(a, argparse._HelpAction) for s in a.option_strings]
    out[""] = flags(parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = flags(sub)
    return out


def usage_block(text: str) -> str:
    """The first fenced block after the usage heading."""
    if USAGE_HEADING not in text:
        raise AssertionError(f"{USAGE_DOC.name} has no heading {USAGE_HEADING!r}")
    block = _FENCE.search(text.split(USAGE_HEADING, 1)[1])
    assert block, f"no fenced block under {USAGE_HEADING!r}"
    return block.group(0)


def missing(block: str, wanted: list[str]) -> list[str]:
    present = set(_FLAG.findall(block))
    return [f for f in wanted if f not in present]


BLOCK = usage_block(USAGE_DOC.read_text())
PAIRS = [(command, flag) for command, flags in options().items() for flag in flags]


@pytest.mark.parametrize(("command", "flag"), PAIRS, ids=[f"{c or 'ocl-reconcile'} {f}" for c, f in PAIRS])
def test_every_flag_of_the_help_is_in_the_usage_block(command, flag):
    assert missing(BLOCK, [flag]) == [], f"{flag} of {command or 'ocl-reconcile'} is not in the usage block"


@pytest.mark.parametrize("command", [c for c in options() if c])
def test_every_command_is_in_the_usage_block(command):
    assert re.search(rf"^ocl-reconcile {command}\b", BLOCK, re.M), command


def test_the_usage_block_names_no_flag_the_program_lacks():
    known = {f for flags in options().values() for f in flags} | {"-h", "--help"}
    assert sorted(set(_FLAG.findall(BLOCK)) - known) == []


def test_the_flag_check_fails_on_a_block_without_the_flag():
    """The check itself can fail: the block with one flag taken out misses that flag."""
    assert "--registry-ca" in BLOCK
    assert missing(BLOCK.replace("--registry-ca", "--other"), ["--registry-ca", "--keep-images"]) == \
        ["--registry-ca"]


# --- links and paths --------------------------------------------------------------------------

def prose(text: str) -> str:
    """The text outside fenced blocks and inline code, where a link or a heading is one."""
    return re.sub(r"`[^`\n]*`", "", _FENCE.sub("", text))


def anchors(path: Path) -> set[str]:
    """Anchors of a file's headings as GitHub makes them: lower case, punctuation dropped, spaces
    to hyphens, a repeated one numbered."""
    seen: dict[str, int] = {}
    out = set()
    for line in _FENCE.sub("", path.read_text()).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_the_anchor_rule_is_githubs():
    """Cases from GitHub's rendering of headings of these docs."""
    assert anchors(F.ROOT / "docs" / "rollout.md") >= {"1-which-openshift-what-reads-what",
                                                       "2-rollout-machineconfig",
                                                       "3-one-disruption-per-change-the-rollout-gate"}


def links(path: Path) -> list[str]:
    return re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", prose(path.read_text()))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(F.ROOT).as_posix())
def test_every_relative_link_reaches_a_file_and_heading(doc):
    broken = []
    for link in links(doc):
        if re.match(r"^[a-z][a-z0-9+.-]*:", link):            # https:, mailto:
            continue
        target, _, anchor = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        if not path.exists():
            broken.append(f"{link}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{link}: no heading #{anchor} in {path.name}")
    assert broken == []


#: Folders of this repository whose paths the docs quote; `docs/` and `manifests/` are left out
#: because the docs also quote upstream repositories' paths of the same names.
OURS = ("reconcile/", "tests/", "kustomize/", "bench/", "examples/", ".ci/")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(F.ROOT).as_posix())
def test_every_path_of_ours_the_docs_quote_exists(doc):
    quoted = re.findall(r"`([^`\s]+)`", _FENCE.sub("", doc.read_text()))
    paths = {q.rstrip(".,:;)") for q in quoted if q.startswith(OURS) and not re.search(r"[<>*{}]|\.\.\.", q)}
    assert sorted(p for p in paths if not (F.ROOT / p).exists()) == []


def test_the_readmes_first_screen_has_the_commands_and_the_rebuild_ratio_the_benchmark_measured():
    """A newcomer's first screen (50 lines) has `make demo`, `make test` and, for issue 32, the
    rebuild ratio of docs/development.md's goals table ("Build cost", the figure bench/build_cost.py
    printed); docs/contract.md gives the same figure."""
    dev = (F.ROOT / "docs" / "development.md").read_text()
    (row,) = [line for line in dev.splitlines() if line.startswith("| a rebuild after a one-file change")]
    ratio = re.search(r"met: (\d+\.\d+x)", row).group(1)
    first = "\n".join((F.ROOT / "README.md").read_text().splitlines()[:50])
    assert "make demo" in first and "make test" in first
    assert ratio in first, (ratio, first[-600:])
    assert ratio in (F.ROOT / "docs" / "contract.md").read_text()
