"""Python code generated from `proto/airlock/v1/airlock.proto` (the wire contract).

Regenerate with `scripts/generate_proto.py`; a test fails when these files are not current.
"""
