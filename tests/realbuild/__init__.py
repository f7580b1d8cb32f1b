"""Real image builds: buildah, docker-registry, skopeo (tests/support/realbuild.py)."""
