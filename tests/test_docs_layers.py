"""The README's picture of the package layers is the import-linter contract that scripts/test checks."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The picture's left column (layer names); the rest of each line describes the layer.
NAME_COLUMN = 49


def _contract_layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers")
    return [layer.replace("deskrig.", "") for layer in contract["layers"]]


def _readme_layers() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"^The package is layered\..*?```\n(.*?)```", readme, re.S | re.M)
    assert match, "the README has no picture of the layers"
    layers: list[str] = []
    for line in match.group(1).splitlines():
        names = line[:NAME_COLUMN].strip()
        if not names:
            continue  # a description carried over to the next line
        if layers and layers[-1].endswith((":", "|")):
            layers[-1] = f"{layers[-1]} {names}"
        else:
            layers.append(names)
    return [re.sub(r"(\w)/", r"\1", layer) for layer in layers]  # "rig/" names the package rig


def test_the_readme_draws_the_layers_contract() -> None:
    def normal(layer: str) -> str:
        return re.sub(r"\s+", " ", layer.strip())

    assert [normal(layer) for layer in _readme_layers()] == [normal(layer) for layer in _contract_layers()]
