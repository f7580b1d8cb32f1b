"""Helpers of the suites: stand-in and real servers, harnesses, the object factory."""
