"""A Ray job submission's record as Ray's job manager keeps it in the GCS key-value store, for the
fake GCS's ``InternalKVGet`` (tests/support/fakes.py): what the RayJob controller reads."""

from __future__ import annotations

import json
from typing import Any

from rayscale.ray.wire import gcs_service_pb2


def submission_reply(status: str, entrypoint: str = "python run.py") -> gcs_service_pb2.InternalKVGetReply:
    """The reply to a get of a submission's record with `status` (ended, for SUCCEEDED, a minute
    after it started)."""
    record: dict[str, Any] = {"status": status, "entrypoint": entrypoint, "message": "",
                              "start_time": 1_700_000_000_000}  # fmt: skip
    if status == "SUCCEEDED":
        record["end_time"] = 1_700_000_060_000
    return gcs_service_pb2.InternalKVGetReply(value=json.dumps(record).encode())
