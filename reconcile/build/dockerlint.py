"""A custom Dockerfile (ConfigMap on-cluster-build-custom-dockerfile) is checked before it is
appended, so a typo blocks the pool with the line that is wrong instead of failing a build later."""

from __future__ import annotations

INSTRUCTIONS = {"ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK",
                "LABEL", "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME",
                "WORKDIR"}


class DockerfileError(ValueError):
    """Where the custom Dockerfile does not parse."""


def check(text: str) -> None:
    """Raise DockerfileError for the first line that is not an instruction with arguments."""
    line_no, pending, start = 0, "", 0
    for raw in text.splitlines():
        line_no += 1
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if not pending:
            start = line_no
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        _instruction(pending + stripped, start)
        pending = ""
    if pending:
        raise DockerfileError(f"line {start}: the last instruction ends with a line continuation")


def _instruction(line: str, line_no: int) -> None:
    word, _, rest = line.partition(" ")
    if word.upper() not in INSTRUCTIONS:
        raise DockerfileError(f"line {line_no}: unknown instruction {word!r}")
    if not rest.strip():
        raise DockerfileError(f"line {line_no}: {word.upper()} needs arguments")
