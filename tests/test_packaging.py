"""The wheel holds every module: each folder of Python files is a package that pyproject.toml
lists (the list is written out, since the layer folders are mapped into one import package), so
``pip install .`` (not only an editable install) gets all of tvms."""
import pathlib

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _folder_of(package: str, package_dir: dict) -> pathlib.Path:
    """The folder setuptools takes ``package`` from: its own mapping, else its parent's plus its name."""
    if package in package_dir:
        return ROOT / package_dir[package]
    parent, _, name = package.rpartition(".")
    return _folder_of(parent, package_dir) / name


def test_every_python_folder_is_a_listed_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = {_folder_of(p, config["package-dir"]) for p in config["packages"]}
    roots = {ROOT / folder for folder in config["package-dir"].values()}
    folders = {f.parent for root in roots for f in root.rglob("*.py") if "__pycache__" not in f.parts}
    assert sorted(map(str, folders - listed)) == []
    assert all(folder.is_dir() for folder in listed)
