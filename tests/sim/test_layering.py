"""The sim and the SGLang client never import each other, and the sim never imports the TUI.

The sim stands in for the server the client talks to: a shared import would let a
client bug hide behind the same bug in the sim. Each side is imported whole in a
fresh interpreter and the other side must not be loaded.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

PROBE = """
import importlib, pkgutil, sys
package = importlib.import_module(sys.argv[1])
for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
print(",".join(sorted(n for n in sys.modules if n.startswith(tuple(sys.argv[2:])))))
"""


@pytest.mark.parametrize(("package", "forbidden"), [
    ("eagle_tui.core.sim", ("eagle_tui.core.sglang", "eagle_tui.tui")),
    ("eagle_tui.core.sglang", ("eagle_tui.core.sim",)),
])
def test_package_does_not_import(package: str, forbidden: tuple[str, ...]) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, package, *forbidden],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
