"""The realnode suite's fixtures beside the session's `node` (tests/conftest.py): the product
deployed once a worker, as shipped with only its image replaced (tests/support/nodejobs.py); for
the modules whose build Pods run on the node, a registry and builder image (`w`, one a module) and
the ServiceAccount's kubeconfig the product runs with on the host (tests/support/nodebuild.py)."""

from __future__ import annotations

import pytest

from tests.support import nodebuild as NB
from tests.support import nodejobs, productimage
from tests.support import realbuild as R


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


@pytest.fixture(scope="module")
def w(request, node, deployed, tmp_path_factory):
    """A registry with the small base, exposed to the node's Pods, and the builder image on the
    node; serving TLS with a test CA where the module sets `REGISTRY_TLS = True`."""
    R.ensure_tools()
    world = NB.world(node, tmp_path_factory.mktemp("nodebuild"), tls=getattr(request.module, "REGISTRY_TLS", False))
    try:
        yield world
    finally:
        world.stop()


@pytest.fixture(scope="module")
def kubeconfig(node, deployed, tmp_path_factory) -> str:
    """The product's ServiceAccount's kubeconfig (a TokenRequest token). Applied again first: an
    Argo CD module that ran before on this worker uninstalls the product (tests/support/argocdnode.py)."""
    deployed.apply()
    return NB.sa_kubeconfig(node, tmp_path_factory.mktemp("sa") / "sa.kubeconfig")
