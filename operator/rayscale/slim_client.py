"""kubernetes-asyncio without the 1,500 model classes rayscale never uses.

`import kubernetes_asyncio` runs the package's `__init__`, which imports every API class and every
model class of the Kubernetes API: about 40 MiB of the operator's memory (measured: 33 -> 72 MiB
RSS for that one import), for classes rayscale never builds. It sends plain dicts and reads raw
responses (``_preload_content=False``; `rayscale.kube.client` skips the model serialisation too).

`install()` (run once by ``rayscale/__init__.py``, before any rayscale module imports the client)
has an import of the packages ``kubernetes_asyncio``, ``kubernetes_asyncio.client``,
``kubernetes_asyncio.client.api`` and ``kubernetes_asyncio.client.models`` give light stand-ins
(an import hook, `sys.meta_path`: nothing is imported before some module asks).
They import a name's own module when it is first asked for (``client.CoreV1Api`` imports
``kubernetes_asyncio/client/api/core_v1_api.py`` alone; kopf's ``client.V1ObjectMeta``
``client/models/v1_object_meta.py``), and anything else (a model class, a name
the library adds later) runs the real ``__init__`` into the stand-in, which then holds everything,
as if it had been imported whole. Nothing changes for code that imported kubernetes-asyncio before:
`install()` does nothing then.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
import types
from pathlib import Path
from typing import Any

__all__ = ["STAND_INS", "install"]

ROOT = "kubernetes_asyncio"
#: Names of ``kubernetes_asyncio.client`` that are not an API class, and the module of each.
CLIENT_MODULES = {
    "ApiClient": "api_client",
    "Configuration": "configuration",
    "ApiException": "exceptions",
    "ApiValueError": "exceptions",
    "ApiTypeError": "exceptions",
    "ApiKeyError": "exceptions",
    "OpenApiException": "exceptions",
}
#: The packages that get a stand-in.
STAND_INS = (ROOT, f"{ROOT}.client", f"{ROOT}.client.api", f"{ROOT}.client.models")
API_CLASS = re.compile(r"[A-Z][A-Za-z0-9]*Api")


def _snake(name: str) -> str:
    """``CoreV1Api`` -> ``core_v1_api``, as the generator names the API modules."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _stand_in(name: str, directory: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        name, directory / "__init__.py", submodule_search_locations=[str(directory)]
    )
    assert spec is not None
    assert spec.loader is not None
    loader = spec.loader
    module = importlib.util.module_from_spec(spec)  # the real package's spec, its __init__ not run
    complete = False

    def load_whole() -> None:
        """Run the real ``__init__`` into the stand-in (once): it then has every name."""
        nonlocal complete
        complete = True
        loader.exec_module(module)

    def getattr_(attr: str) -> Any:
        if attr.startswith("__") and attr not in ("__version__", "__all__"):
            raise AttributeError(attr)
        if (directory / f"{attr}.py").is_file() or (directory / attr / "__init__.py").is_file():
            value: Any = importlib.import_module(f"{name}.{attr}")  # a submodule: `from pkg import rest`
            setattr(module, attr, value)
            return value
        defined_in = _module_of(name, attr, directory)
        if defined_in is not None:
            value = getattr(importlib.import_module(defined_in), attr)
            setattr(module, attr, value)
            return value
        if not complete:
            load_whole()
            if attr in module.__dict__:
                return module.__dict__[attr]
        raise AttributeError(f"module {name!r} has no attribute {attr!r}")

    module.__getattr__ = getattr_  # type: ignore[method-assign]  # PEP 562
    return module


def _module_of(package: str, attr: str, directory: Path) -> str | None:
    """The module that defines `attr` of `package`, when it is known without the real __init__."""
    if package == f"{ROOT}.client":
        if attr in CLIENT_MODULES:
            return f"{package}.{CLIENT_MODULES[attr]}"
        if API_CLASS.fullmatch(attr) and (directory / "api" / f"{_snake(attr)}.py").is_file():
            return f"{package}.api.{_snake(attr)}"
        if (directory / "models" / f"{_snake(attr)}.py").is_file():  # kopf's V1ObjectMeta
            return f"{package}.models.{_snake(attr)}"
    if package == f"{ROOT}.client.models" and (directory / f"{_snake(attr)}.py").is_file():
        return f"{package}.{_snake(attr)}"
    return None


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the stand-ins, when they are first imported, in the directories of the real packages."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(
        self, fullname: str, path: Any, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in STAND_INS:
            return None  # a submodule the stand-ins do not cover is found as usual, in their __path__
        directory = self.root.joinpath(*fullname.split(".")[1:])
        spec = importlib.util.spec_from_loader(fullname, _Loader(directory), is_package=True)
        assert spec is not None
        spec.submodule_search_locations = [str(directory)]
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _stand_in(spec.name, self.directory)

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the stand-in imports what is asked of it."""


def install() -> None:
    """Have ``import kubernetes_asyncio`` (and its client, api and models packages) give the
    stand-ins from now on; nothing is imported now. Does nothing when kubernetes-asyncio is
    imported already (or absent), or the stand-ins are installed."""
    if ROOT in sys.modules or any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    spec = importlib.machinery.PathFinder.find_spec(ROOT)
    if spec is None or not spec.submodule_search_locations:
        return
    sys.meta_path.insert(0, _Finder(Path(next(iter(spec.submodule_search_locations)))))
