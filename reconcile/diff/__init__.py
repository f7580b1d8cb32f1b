"""Showing a plan as kubectl diff does: unified YAML, JSON, an external diff program; secrets masked."""
