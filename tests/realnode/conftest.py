"""The realnode suite's fixtures beside the session's `node` (tests/conftest.py): the product
deployed once a worker, as shipped with only its image replaced (tests/support/nodejobs.py)."""

from __future__ import annotations

import pytest

from tests.support import nodejobs, productimage


@pytest.fixture(scope="session")
def deployed(node, tmp_path_factory):
    image = productimage.product_image()
    node.import_image(image.archive)
    return nodejobs.Deployed(node, image.name, tmp_path_factory.mktemp("overlay"))


@pytest.fixture
def d(deployed):
    """The deployed product with the last test's scenario cleared."""
    deployed.clear()
    return deployed
