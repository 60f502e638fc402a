"""The package build's one addition to pyproject.toml: the Ray GCS protobuf bindings, generated.

``operator/rayscale/ray/protos/*_pb2.py(i)`` are git-ignored (see generate.py there for why), so a
clean clone, its sdist or a wheel built from either would lack them. Every wheel build (``pip
install .``, ``pip wheel .``, ``python -m build``, a wheel built from the sdist) runs ``build_py``;
here it also runs generate.py's ``generate`` into the build directory, with the grpcio-tools and
mypy-protobuf of ``[build-system] requires``: the wheel gets the bindings and their ``.pyi`` stubs,
the source tree is never written. Bindings the source tree already holds (``make proto``) are
overwritten in the build directory by the fresh ones.

An editable install (``pip install -e .``, ``make install``) generates nothing: it imports the
package from the source tree, whose bindings ``make proto`` writes, as before.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from setuptools import setup  # type: ignore[import-untyped]  # setuptools ships no type information
from setuptools.command.build_py import build_py  # type: ignore[import-untyped]

GENERATOR = Path(__file__).resolve().parent / "operator" / "rayscale" / "ray" / "protos" / "generate.py"


def generator() -> ModuleType:
    """generate.py, loaded from its file: importing `rayscale` would need its dependencies."""
    spec = importlib.util.spec_from_file_location("rayscale_proto_generate", GENERATOR)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {GENERATOR}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithProtos(build_py):  # type: ignore[misc]  # a subclass of an untyped class
    """build_py, then the bindings generated into the build directory (not in editable mode)."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        for path in generator().generate(Path(self.build_lib).resolve()):
            print(f"generated {path}")

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs: list[str] = super().get_outputs(include_bytecode)
        if self.editable_mode:
            return outputs
        generated = [str(p) for p in generator().generated_files(Path(self.build_lib).resolve())]
        return outputs + [p for p in generated if p not in outputs]


setup(cmdclass={"build_py": BuildPyWithProtos})
