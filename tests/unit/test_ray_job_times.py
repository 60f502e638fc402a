"""The GCS job table's start and end times (``GetAllJobInfo``): what the idle clock of a RayCluster
reads to see a driver that came and went between two rounds."""

from __future__ import annotations

from rayscale.ray import convert
from rayscale.ray.protos import common_pb2 as common_pb
from rayscale.ray.protos import gcs_pb2 as gcs_pb

JOB = bytes.fromhex("02000000")


def test_a_finished_driver_has_its_start_and_end_times() -> None:
    msg = gcs_pb.JobTableData(
        job_id=JOB,
        is_dead=True,
        entrypoint="python -c ...",
        start_time=1_700_000_000_000,
        end_time=1_700_000_042_500,
    )
    job = convert.job_info(msg)
    assert (job.is_dead, job.start_time_ms, job.end_time_ms) == (True, 1_700_000_000_000, 1_700_000_042_500)


def test_a_live_driver_has_no_end_time() -> None:
    msg = gcs_pb.JobTableData(
        job_id=JOB,
        start_time=1_700_000_000_000,
        config=common_pb.JobConfig(metadata={convert.JOB_SUBMISSION_ID: "raysubmit_x"}),
    )
    job = convert.job_info(msg)
    assert (job.is_dead, job.end_time_ms, job.submission_id) == (False, 0, "raysubmit_x")


def test_times_are_rays_wire_numbers() -> None:
    """Ray's JobTableData carries start_time and end_time as fields 7 and 8, uint64 (Ray 2.60)."""
    fields = {f.name: (f.number, f.type) for f in gcs_pb.JobTableData.DESCRIPTOR.fields}
    uint64 = 4  # FieldDescriptor.TYPE_UINT64
    assert fields["start_time"] == (7, uint64)
    assert fields["end_time"] == (8, uint64)
    # what an old record without them decodes to
    assert convert.job_info(gcs_pb.JobTableData(job_id=JOB)).end_time_ms == 0
