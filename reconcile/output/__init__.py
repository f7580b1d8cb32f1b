"""What a run says: the status table, rendered manifests, metrics, logs."""
