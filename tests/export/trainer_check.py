"""Runs INSIDE the trainers' venv (scripts/trainers/install.sh), never in the project's.

Feeds eagle-tui exports to the trainers' own code and prints what came back:

- speculators: its ``prepare-data`` command (the CLI a user runs; pre-tokenized rows pass
  through ``_passthrough_pretokenized``), then the saved dataset read back with
  ``datasets.load_from_disk``;
- SpecForge: ``specforge.data.prompt_builder.prepare_prompt_tasks`` (what ``specforge
  train`` calls for ``data.prompts_path``), and optionally ``load_config`` on a run config.

Usage: ``python trainer_check.py JOB.json``; JOB names the files and lengths. The last line
on stdout is one JSON object; everything else is the trainers' own output, for people.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any


def speculators_prepare(data: str, model: str, output: str, seq_length: int) -> dict[str, Any]:
    """Run ``speculators prepare-data`` and read its dataset back (rows in its order)."""
    cli = Path(sys.executable).with_name("speculators")
    command = [str(cli), "prepare-data", "--model", model, "--data", data, "--output", output,
               "--seq-length", str(seq_length), "--num-preprocessing-workers", "1"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    log = (done.stdout + done.stderr).strip().splitlines()
    print(f"$ {' '.join(command[1:])}  -> exit {done.returncode}")
    print("\n".join("  | " + line for line in log[-12:]))
    if done.returncode != 0:
        return {"returncode": done.returncode, "log": log[-12:], "rows": None}
    from datasets import load_from_disk

    dataset = load_from_disk(output).with_format(None)
    rows = [{"input_ids": [int(i) for i in row["input_ids"]],
             "loss_mask": [int(m) for m in row["loss_mask"]]} for row in dataset]
    return {"returncode": 0, "log": log[-12:], "rows": rows}


def specforge_prepare(data: str, max_length: int) -> dict[str, Any]:
    """SpecForge's own prompt preparation of a pre-tokenized JSONL (order kept)."""
    from specforge.data.prompt_builder import prepare_prompt_tasks

    tasks = prepare_prompt_tasks(
        data, None, chat_template=None, max_length=max_length, is_preformatted=False,
        train_only_last_turn=False, cache_dir=None, cache_key=None, num_proc=None,
    )
    rows = [dict(task["payload"]) for task in tasks]
    print(f"specforge prepare_prompt_tasks({Path(data).name}, max_length={max_length}) "
          f"-> {len(rows)} prompt tasks")
    return {"rows": rows}


def specforge_config(path: str) -> dict[str, Any]:
    """``specforge.config.schema.load_config`` on a run config (schema validation only)."""
    from specforge.config.schema import load_config

    config = load_config(path)
    print(f"specforge load_config({Path(path).name}): mode={config.mode}, "
          f"data.prompts_path={config.data.prompts_path}, max_length={config.data.max_length}")
    return {"mode": config.mode, "prompts_path": config.data.prompts_path}


def main() -> None:
    job = json.loads(Path(sys.argv[1]).read_text())
    versions = {name: version(name) for name in ("speculators", "specforge", "torch",
                                                 "transformers", "datasets")}
    print("trainers: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    result: dict[str, Any] = {"versions": versions, "speculators": [], "specforge": []}
    for run in job.get("speculators", []):
        result["speculators"].append(speculators_prepare(**run))
    for run in job.get("specforge", []):
        result["specforge"].append(specforge_prepare(**run))
    if job.get("specforge_config"):
        result["specforge_config"] = specforge_config(job["specforge_config"])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
