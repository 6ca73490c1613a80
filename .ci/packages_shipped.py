"""Every Python package of the checkout is in the wheel and the sdist (a hand-kept list once left
`nanobench/cost` out of the wheel, and capture, compile and pool-budget failed on import)."""

from __future__ import annotations

import sys
import tarfile
import zipfile
from pathlib import Path

TOP = ("nanobench", "engine", "kernels", "reports")


def packages_in_checkout(root: Path) -> set[str]:
    return {
        str(init.parent.relative_to(root))
        for top in TOP
        for init in (root / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }


def packages_in(names: list[str], strip: int) -> set[str]:
    return {"/".join(Path(n).parts[strip:-1]) for n in names if n.endswith("/__init__.py")}


def main(wheel: str, sdist: str) -> int:
    want = packages_in_checkout(Path(__file__).resolve().parent.parent)
    with zipfile.ZipFile(wheel) as z:
        in_wheel = packages_in(z.namelist(), 0)
    with tarfile.open(sdist) as t:
        in_sdist = packages_in(t.getnames(), 1)
    missing = {"wheel": want - in_wheel, "sdist": want - in_sdist}
    for where, names in missing.items():
        for name in sorted(names):
            print(f"packages_shipped: {name} is not in the {where}", file=sys.stderr)
    if any(missing.values()):
        return 1
    print(f"packages_shipped: all {len(want)} packages are in the wheel and the sdist")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
