"""Schemathesis's checks, and one of the gateway's own, for the fuzz run of tests/tests/gateway.rs.

A schema-valid request may still be refused for what no schema can say: its idempotency key was
used by another request (422 idempotency_mismatch), its callback URL names a private address
(422 callback_forbidden, callback_unresolved), or the fleet refused its inline policy (422 with
the fleet's code). schemathesis.toml lets positive_data_acceptance take 422 for those; this check
keeps the rest of it: a schema-valid request is never refused as malformed.
"""

import schemathesis

# The codes that say a request is not what the document describes.
MALFORMED = {"invalid_json", "unreadable_body", "invalid_field", "invalid_idempotency_key", "unsupported_media_type"}


@schemathesis.check
def valid_data_is_not_refused_as_malformed(ctx, response, case):
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or not 400 <= response.status_code < 500:
        return None
    try:
        code = response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        # Not the error schema at all: response_schema_conformance reports it.
        return None
    if code in MALFORMED:
        raise AssertionError(
            f"A schema-valid request was refused as malformed: {response.status_code} {code}: {response.text}"
        )
    return None
