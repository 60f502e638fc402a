"""The Ray GCS protos: bindings up to date with the .proto files, and wire-compatible with Ray.

The compatibility check compares our descriptors with those of the installed ``ray`` wheel
(``ray.core.generated``). Both declare the same message names, which protobuf does not allow
twice in one process, so Ray's side is read in a subprocess.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor as d

from rayscale.ray.protos import generate
from rayscale.ray.wire import (
    SERVICES,
    autoscaler_pb2,
    common_pb2,
    gcs_pb2,
    gcs_service_pb2,
    node_manager_pb2,
)

OUR_MODULES = (autoscaler_pb2, common_pb2, gcs_pb2, gcs_service_pb2, node_manager_pb2)
# Ray's generated modules that declare (or import) what ours mirror.
RAY_MODULES = (
    "ray.core.generated.autoscaler_pb2",
    "ray.core.generated.common_pb2",
    "ray.core.generated.gcs_pb2",
    "ray.core.generated.gcs_service_pb2",
    "ray.core.generated.node_manager_pb2",
)


def test_bindings_are_up_to_date(tmp_path: Path) -> None:
    fresh = generate.generate(tmp_path)
    in_tree = generate.generated_files()
    assert [p.name for p in fresh] == [p.name for p in in_tree]
    stale = [
        p.name
        for p, q in zip(in_tree, fresh, strict=True)
        if not p.exists() or p.read_bytes() != q.read_bytes()
    ]
    assert not stale, f"run `make proto`: {stale} differ from a fresh generation"


def _field(f: d.FieldDescriptor) -> dict[str, Any]:
    type_name = f.message_type.full_name if f.message_type else f.enum_type.full_name if f.enum_type else ""
    return {"number": f.number, "type": f.type, "repeated": f.is_repeated, "type_name": type_name}


def _ours() -> dict[str, Any]:
    """Full name -> shape, for every message, enum (nested ones too) and method we declare."""
    out: dict[str, Any] = {}

    def enum(e: d.EnumDescriptor) -> None:
        out[e.full_name] = {v.name: v.number for v in e.values}

    def message(m: d.Descriptor) -> None:
        out[m.full_name] = {f.name: _field(f) for f in m.fields}
        for nested in m.nested_types:
            message(nested)
        for e in m.enum_types:
            enum(e)

    for module in OUR_MODULES:
        for m in module.DESCRIPTOR.message_types_by_name.values():
            message(m)
        for e in module.DESCRIPTOR.enum_types_by_name.values():
            enum(e)
    for service in SERVICES:
        for method in service.methods:
            out[f"{service.full_name}/{method.name}"] = [
                method.input_type.full_name,
                method.output_type.full_name,
            ]
    return out


def test_every_service_is_checked() -> None:
    declared = {s.full_name for m in OUR_MODULES for s in m.DESCRIPTOR.services_by_name.values()}
    assert declared == {s.full_name for s in SERVICES}


RAY_DUMP = """
import importlib, json, sys
from google.protobuf import descriptor_pool
pool = descriptor_pool.Default()
for module in sys.argv[2:]:
    importlib.import_module(module)
out = {}
for name in json.loads(sys.argv[1]):
    if "/" in name:
        service, method = name.split("/")
        m = pool.FindServiceByName(service).methods_by_name.get(method)
        out[name] = m and [m.input_type.full_name, m.output_type.full_name]
        continue
    try:
        m = pool.FindMessageTypeByName(name)
    except KeyError:
        try:
            e = pool.FindEnumTypeByName(name)
        except KeyError:
            out[name] = None
            continue
        out[name] = {v.name: v.number for v in e.values}
        continue
    out[name] = {
        f.name: {
            "number": f.number,
            "type": f.type,
            "repeated": f.is_repeated,
            "type_name": f.message_type.full_name if f.message_type else
                         f.enum_type.full_name if f.enum_type else "",
        }
        for f in m.fields
    }
print(json.dumps(out))
"""


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed (pip install ray)")
def test_wire_compatible_with_the_installed_ray(tmp_path: Path) -> None:
    ours = _ours()
    result = subprocess.run(
        [sys.executable, "-c", RAY_DUMP, json.dumps(sorted(ours)), *RAY_MODULES],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    theirs = json.loads(result.stdout)
    problems = []
    for name, shape in ours.items():
        ray_shape = theirs[name]
        if ray_shape is None:
            problems.append(f"{name}: not in Ray")
        elif isinstance(shape, dict):
            for member, value in shape.items():  # a subset: every member we declare is Ray's
                if ray_shape.get(member) != value:
                    problems.append(f"{name}.{member}: ours {value}, Ray's {ray_shape.get(member)}")
        elif shape != ray_shape:
            problems.append(f"{name}: ours {shape}, Ray's {ray_shape}")
    assert not problems, "\n".join(problems)
