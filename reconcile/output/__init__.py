"""What a run says: the status table, rendered manifests, explain, metrics, logs."""
