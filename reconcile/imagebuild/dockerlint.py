"""A custom Dockerfile (ConfigMap on-cluster-build-custom-dockerfile) is checked before it is
appended, so a typo blocks the pool with the line that is wrong instead of failing a build later."""

from __future__ import annotations

import re

INSTRUCTIONS = {"ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK",
                "LABEL", "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME",
                "WORKDIR"}


class DockerfileError(ValueError):
    """Where the custom Dockerfile does not parse."""


#: A heredoc opener in RUN, COPY or ADD: `<<EOF`, `<<-EOF`, `<<"EOF"`, `<<'EOF'`.
_HEREDOC = re.compile(r"<<(-?)([\"']?)([A-Za-z_][A-Za-z0-9_]*)\2")


def check(text: str) -> None:
    """Raise DockerfileError for the first line that is not an instruction with arguments.

    Parsed as buildah (Docker's parser) does: comment and empty lines inside a continuation are
    dropped, and the body of a heredoc (RUN/COPY/ADD `<<EOF` ... `EOF`) is not instructions.
    tests/realbuild/test_realbuild.py holds these rules against `buildah build`."""
    lines = text.splitlines()
    line_no, pending, start = 0, "", 0
    while line_no < len(lines):
        raw = lines[line_no]
        line_no += 1
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not pending:
            start = line_no
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        instruction = pending + stripped
        _instruction(instruction, start)
        pending = ""
        if instruction.split(" ", 1)[0].upper() in ("RUN", "COPY", "ADD"):
            for dash, _, word in _HEREDOC.findall(instruction):
                while True:
                    if line_no >= len(lines):
                        raise DockerfileError(f"line {start}: heredoc {word} is never closed")
                    body = lines[line_no]
                    line_no += 1
                    if (body.lstrip("\t") if dash else body) == word:
                        break
    if pending:
        raise DockerfileError(f"line {start}: the last instruction ends with a line continuation")


def _instruction(line: str, line_no: int) -> None:
    word, _, rest = line.partition(" ")
    if word.upper() not in INSTRUCTIONS:
        raise DockerfileError(f"line {line_no}: unknown instruction {word!r}")
    if not rest.strip():
        raise DockerfileError(f"line {line_no}: {word.upper()} needs arguments")
