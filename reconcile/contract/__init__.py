"""The vocabulary every layer shares: annotation keys, names and labels, object accessors, YAML, errors
as values. Pure."""
