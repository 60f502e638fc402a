"""kopf's Body and Patch, once `kopf_views.install()` ran: no reference cycles (an event is freed
by reference counting as soon as it is dropped, with the cyclic collector off), and the views read
and write through their parents as kopf's own do."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any, cast

import pytest
from kopf._cogs.structs import bodies, patches

from rayscale.kube import kopf_views


@pytest.fixture
def collector_off() -> Iterator[None]:
    assert kopf_views.install()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def raw() -> bodies.RawBody:
    return cast(
        bodies.RawBody,
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "1"}, "annotations": {}},
            "spec": {"nodeName": "n"},
            "status": {"phase": "Running"},
        },
    )


@pytest.mark.usefixtures("collector_off")
def test_a_body_and_its_patch_are_freed_without_the_collector() -> None:
    body = bodies.Body(raw())
    patch = patches.Patch(body=body)
    assert (body.meta.labels["a"], body.metadata.name, body.spec["nodeName"]) == ("1", "p", "n")
    assert body.status["phase"] == "Running"
    patch.meta.labels["b"] = "2"
    patch.status["x"] = 1
    gone: list[weakref.ref[Any]] = [weakref.ref(body), weakref.ref(patch)]
    del body, patch
    assert [ref() for ref in gone] == [None, None]


@pytest.mark.usefixtures("collector_off")
def test_views_read_and_write_through_their_parents() -> None:
    body = bodies.Body(raw())
    assert dict(body.meta.annotations) == {}
    assert body.meta.uid == "u"
    assert body.meta.namespace == "ns"
    patch = patches.Patch({"spec": {"replicas": 1}}, body=body)
    patch.meta.annotations["k"] = "v"
    patch.spec["replicas"] = 2
    assert patch == {"spec": {"replicas": 2}, "metadata": {"annotations": {"k": "v"}}}
    assert patch.fns == []
    assert patches.Patch(patch).fns == []


def test_install_is_idempotent() -> None:
    assert kopf_views.install()
    assert kopf_views.install()
    assert kopf_views.installed()
