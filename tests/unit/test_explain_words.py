"""manifests/explain.yaml, the words of `explain`: one entry per lifecycle row (docs/contract.md)
plus NOT_OPTED_IN, each filled from explain.FIELDS alone, so no row can end in a KeyError on a
cluster where a test never put a pool in it."""

from __future__ import annotations

import string

import pytest

from reconcile.core import lifecycle
from reconcile.imagebuild import templates
from reconcile.output import explain

WORDS = templates.table("explain.yaml")["transitions"]
ROWS = [t.name for t in lifecycle.Transition] + [explain.NOT_OPTED_IN]


def test_every_lifecycle_row_has_words_and_nothing_else_does():
    assert sorted(WORDS) == sorted(ROWS)


@pytest.mark.parametrize("row", ROWS)
def test_each_row_names_only_known_fields(row):
    texts = [WORDS[row]["because"], *WORDS[row]["changes"]]
    assert texts[1:], f"{row}: nothing says what would change the outcome"
    used = {name for text in texts for _, name, _, _ in string.Formatter().parse(text) if name}
    assert used <= set(explain.FIELDS), used - set(explain.FIELDS)
    filled = {name: f"<{name}>" for name in explain.FIELDS}
    for text in texts:
        assert "{" not in text.format_map(filled)
