"""Ship a demo run's warm start in the package (``trainer/demo_warm_start/``), with its recipe.

    python scripts/ship_warm_start.py runs/demo/default

copies those of ``RUN/warm-start/sft/final``'s files that differ from the model it was trained
from (``RUN/model``: the demo installs that one's files first, so the tokenizer and chat
template are not shipped twice) and writes ``recipe.json``: the stage's
fingerprint and parameters (from its ``sft.stage.json``), the SHA-256 of every file, how long
the stage took and on what (this machine's Python, torch, transformers and TRL, its CPUs).
Run it on the machine that trained the warm start, right after the run, and only for a warm
start that ``harnessgrid demo`` trained itself (not one it installed).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sys
from importlib.metadata import version
from pathlib import Path

TARGET = Path(__file__).resolve().parents[1] / "trainer" / "demo_warm_start"


def main(run: Path) -> int:
    stage_dir = run / "warm-start" / "sft"
    record = json.loads(stage_dir.with_name("sft.stage.json").read_text())
    if not record.get("finished") or record.get("installed"):
        print(f"{stage_dir}: not a warm start this machine trained to the end", file=sys.stderr)
        return 2
    final = stage_dir / "final"
    if TARGET.exists():
        shutil.rmtree(TARGET)
    TARGET.mkdir()
    digests = {}
    for path in sorted(final.iterdir()):
        upstream = run / "model" / path.name
        if path.is_file() and not (upstream.is_file()
                                   and upstream.read_bytes() == path.read_bytes()):
            shutil.copyfile(path, TARGET / path.name)
            digests[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    recipe = {
        "what": "the harnessgrid demo's shared warm start (trainer/demo.py, run_warm_start): "
                "SFT of tiny:micro-base on scripted-oracle demonstrations through the "
                "configurations of its warm-start rule, trained by `harnessgrid demo` itself",
        "fingerprint": record["fingerprint"],
        "params": record["params"],
        "sha256": digests,
        "trained": {"seconds": record.get("seconds"), "finished_at": record.get("finished_at"),
                    "command": "harnessgrid demo --train-warm-start",
                    "python": platform.python_version(), "torch": version("torch"),
                    "transformers": version("transformers"), "trl": version("trl"),
                    "cpus": os.cpu_count(), "machine": platform.machine()},
    }
    (TARGET / "recipe.json").write_text(json.dumps(recipe, indent=2) + "\n")
    print(f"shipped {len(digests)} files to {TARGET} (fingerprint {record['fingerprint']})")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(main(Path(sys.argv[1])))
