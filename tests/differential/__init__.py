"""Differential test: rayscale's scheduler against Ray 2.60's ResourceDemandScheduler.

Generated cases (``generate``) run through rayscale's ``schedule`` in this process and through
Ray's scheduler in a subprocess (``ray_oracle``, never imported here: Ray's protobuf messages
collide with ours). ``compare`` lists the differences that matter, ``allowlist`` excuses the
deliberate ones, ``shrink`` reduces a failing case and ``scenario_io`` writes it as a scenario
file that ``rayscale simulate`` replays.
"""
