"""The real node: the product image built from the Containerfile and run as the CronJob runs it
(tests/support/productimage.py)."""
