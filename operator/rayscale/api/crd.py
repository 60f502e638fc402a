"""CustomResourceDefinition manifests generated from the API models.

A custom resource is described once, as a `CrdDefinition` (names, models, printer columns);
`crd_manifest` turns it into the apiextensions.k8s.io/v1 object written to `crds/`.
"""

from __future__ import annotations

import dataclasses

from pydantic import BaseModel

from rayscale.api.names import ResourceName
from rayscale.api.schema import JsonDict, structural_schema


@dataclasses.dataclass(frozen=True)
class PrinterColumn:
    name: str
    type: str
    json_path: str
    priority: int = 0


@dataclasses.dataclass(frozen=True)
class OlderVersion:
    """A version served beside the definition's own, with the schema of its own (older) models.

    Served without conversion (strategy None, as KubeRay serves ray.io/v1alpha1): the API server
    stores an object written in this version as the storage version by changing only its
    apiVersion, prunes it by each version's schema, and serves it under both. So its models must
    be a subset of the storage version's: the same fields, meaning and defaults, fewer of them.
    """

    name: str
    spec_model: type[BaseModel]
    status_model: type[BaseModel] | None = None
    spec_required: bool = True


@dataclasses.dataclass(frozen=True)
class CrdDefinition:
    names: ResourceName  # group, kind, plural, singular and the (stored) version
    spec_model: type[BaseModel]
    status_model: type[BaseModel] | None = None
    scope: str = "Namespaced"
    categories: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    spec_required: bool = True
    older_versions: tuple[OlderVersion, ...] = ()  # served after `versions`, never stored
    validations: tuple[JsonDict, ...] = ()  # CEL rules on the whole object (x-kubernetes-validations)

    @property
    def name(self) -> str:
        return self.names.crd_name

    @property
    def filename(self) -> str:
        return f"{self.names.group}_{self.names.plural}.yaml"


def object_schema(defn: CrdDefinition | OlderVersion) -> JsonDict:
    """The openAPIV3Schema of one version: apiVersion, kind, metadata, spec and status (and the
    definition's rules on the whole object)."""
    properties: JsonDict = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": structural_schema(defn.spec_model),
    }
    if defn.status_model is not None:
        properties["status"] = structural_schema(defn.status_model)
    schema: JsonDict = {"type": "object", "properties": properties}
    if defn.spec_required:
        schema["required"] = ["spec"]
    if isinstance(defn, CrdDefinition) and defn.validations:
        schema["x-kubernetes-validations"] = [dict(rule) for rule in defn.validations]
    return schema


def crd_manifest(defn: CrdDefinition) -> JsonDict:
    """The CustomResourceDefinition object for `defn`; the first version is the storage version,
    its older versions follow (served, not stored), with the same columns and subresources."""
    names: JsonDict = {
        "kind": defn.names.kind,
        "listKind": f"{defn.names.kind}List",
        "plural": defn.names.plural,
        "singular": defn.names.singular,
    }
    if defn.categories:
        names["categories"] = list(defn.categories)
    if defn.short_names:
        names["shortNames"] = list(defn.short_names)
    schema = object_schema(defn)
    versions = []
    served = [(defn.names.version, schema, defn.status_model)]
    served += [(o.name, object_schema(o), o.status_model) for o in defn.older_versions]
    for i, (version, version_schema, status_model) in enumerate(served):
        entry: JsonDict = {"name": version, "served": True, "storage": i == 0}
        if defn.printer_columns:
            entry["additionalPrinterColumns"] = [
                {"name": c.name, "type": c.type, "jsonPath": c.json_path, "priority": c.priority}
                for c in defn.printer_columns
            ]
        entry["schema"] = {"openAPIV3Schema": version_schema}
        if status_model is not None:
            entry["subresources"] = {"status": {}}
        versions.append(entry)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": defn.name},
        "spec": {"group": defn.names.group, "names": names, "scope": defn.scope, "versions": versions},
    }
