"""The cycle collector's setting for a delivering process (``app.collector``), checked in a
process of its own: freezing the test runner's objects would change every later test."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import gc, json
import app.main  # the service's imports, as a serve worker holds them
from app.collector import tune_for_delivery
before = gc.get_freeze_count()
tune_for_delivery()
frozen = gc.get_freeze_count()

class Node:
    pass

a, b = Node(), Node()
a.other, b.other = b, a  # a cycle made after startup, then dropped
del a, b
print(json.dumps({"before": before, "frozen": frozen, "collected": gc.collect()}))
"""


def test_startup_objects_are_frozen_and_later_cycles_still_collected():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["before"] == 0
    assert probe["frozen"] > 50_000  # the imported libraries' objects, out of every collection
    assert probe["collected"] >= 2  # the two nodes of the dropped cycle (and their dicts)
