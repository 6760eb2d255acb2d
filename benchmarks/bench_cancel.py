"""Esc while the in-process model reads a long prompt: how long until it stops, and what
the finer prefill steps cost in reading speed.

    uv run python benchmarks/bench_cancel.py [--tokens 3000] [--runs 3] [--cancel-after 0.5]
                                             [--steps 2048,512,256,128,64] [--json]

Method:

* The model is the tiny random-weight model (models/build_tiny.py, fp32, built into a
  temp dir), run in-process on this machine's device. The prompt is a chat of about
  ``--tokens`` tokens, read from scratch each run (no prefix cache).
* Time to stop: a generation starts, the cancel event is set ``--cancel-after`` s after
  it began running, and the figure is the time from the cancel to the generation's end.
  Median of ``--runs``. Measured twice: through ``MlxRuntime`` (the app's path: steps paced
  to ``PREFILL_STEP_S``), and through mlx_lm's own prefill with its default 2048-token
  steps and the cancel checked from its progress callback (how the runtime read prompts
  before), so both figures come from the same run of the same machine.
* Reading speed: the whole prompt read and one token generated, tokens/s of the prompt,
  median of ``--runs``: mlx_lm's prefill at each fixed step of ``--steps``, and the
  runtime's paced steps. The ratio paced / 2048 is the price of stopping quickly.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hermes_tui.providers.mlx import runtime as mlx_runtime  # noqa: E402
from hermes_tui.providers.mlx.runtime import GenerationAborted, MlxRuntime  # noqa: E402

MLX_LM_DEFAULT_STEP = 2048


def long_chat(runtime: MlxRuntime, loaded, tokens: int) -> list[dict[str, str]]:
    lines: list[str] = []
    while True:
        messages = [{"role": "system", "content": "You are terse."},
                    {"role": "user", "content": "\n".join(lines) or "Summarise this build log."}]
        if len(runtime.prompt_tokens(loaded, messages)) >= tokens:
            return messages
        lines.append(f"step {len(lines)}: compiling module_{len(lines)}.c with -O2, 3 warnings, error E{len(lines) % 97}")


def mlx_lm_generation(loaded, tokens: list[int], step: int, cancel: threading.Event) -> Callable[[], None]:
    """The runtime's generation as it was: mlx_lm's prefill, cancel checked per step."""
    import mlx.core as mx
    from mlx_lm import stream_generate
    from mlx_lm.models.cache import make_prompt_cache

    def check(*_: Any) -> None:
        if cancel.is_set():
            raise GenerationAborted("cancelled", "generation cancelled")

    def run() -> None:
        for _ in stream_generate(
            loaded.model, loaded.tokenizer, mx.array(tokens), max_tokens=100_000,
            prompt_cache=make_prompt_cache(loaded.model), prompt_progress_callback=check,
            prefill_step_size=step,
        ):
            check()

    return run


def time_to_stop(runtime: MlxRuntime, start: Callable[[threading.Event], Any], cancel_after: float) -> float:
    """Seconds from the cancel to the generation's end; ``start`` returns its MlxJob."""
    cancel = threading.Event()
    job = start(cancel)
    while job.state == "queued":
        time.sleep(0.005)
    time.sleep(cancel_after)
    cancel.set()
    cancelled_at = time.perf_counter()
    job.wait()
    stopped = time.perf_counter() - cancelled_at
    if not isinstance(job.error, GenerationAborted):
        raise SystemExit(f"the generation was not cancelled (it ended with {job.error!r}): use a longer prompt")
    return stopped


def mlx_lm_prefill_tps(runtime: MlxRuntime, loaded, tokens: list[int], step: int) -> float:
    import mlx.core as mx
    from mlx_lm import stream_generate
    from mlx_lm.models.cache import make_prompt_cache

    def run() -> float:
        began = time.perf_counter()
        for _ in stream_generate(loaded.model, loaded.tokenizer, mx.array(tokens), max_tokens=1,
                                 prompt_cache=make_prompt_cache(loaded.model), prefill_step_size=step):
            return len(tokens) / (time.perf_counter() - began)
        raise AssertionError("no token generated")

    return runtime._call(run)  # on the runtime's MLX thread, as the app reads prompts


def run(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "models"))
    import build_tiny

    model = str(build_tiny.build(Path(tempfile.mkdtemp(prefix="bench_cancel_")))["fp32"])
    runtime = MlxRuntime()
    loaded = runtime.load(model)
    messages = long_chat(runtime, loaded, args.tokens)
    tokens = runtime.prompt_tokens(loaded, messages)
    runtime.generate(loaded, messages[:1], max_tokens=2)  # warm up

    def through_runtime(cancel: threading.Event):
        return runtime.start_generation(loaded, messages, max_tokens=100_000, cancel=cancel)

    def through_mlx_lm(cancel: threading.Event):
        return runtime._mlx.submit(mlx_runtime.MlxJob(
            runtime._mlx, mlx_lm_generation(loaded, tokens, MLX_LM_DEFAULT_STEP, cancel), generation=True,
        ))

    stops = {"paced": [], "mlx_lm_2048": []}
    for _ in range(args.runs):  # alternate, so drift in the machine's speed hits both
        stops["paced"].append(time_to_stop(runtime, through_runtime, args.cancel_after))
        stops["mlx_lm_2048"].append(time_to_stop(runtime, through_mlx_lm, args.cancel_after))

    speeds: dict[str, list[float]] = {str(step): [] for step in args.steps}
    speeds["paced"] = []
    for _ in range(args.runs):
        for step in args.steps:
            speeds[str(step)].append(mlx_lm_prefill_tps(runtime, loaded, tokens, step))
        speeds["paced"].append(runtime.generate(loaded, messages, max_tokens=1).prompt_tps)

    median_tps = {name: statistics.median(values) for name, values in speeds.items()}
    return {
        "prompt_tokens": len(tokens),
        "runs": args.runs,
        "cancel_after_s": args.cancel_after,
        "paced_step_s": mlx_runtime.PREFILL_STEP_S,
        "time_to_stop_s": {name: {"median": statistics.median(v), "all": v} for name, v in stops.items()},
        "prefill_tps": {name: {"median": median_tps[name], "all": speeds[name]} for name in speeds},
        "paced_vs_2048": median_tps["paced"] / median_tps[str(MLX_LM_DEFAULT_STEP)]
        if str(MLX_LM_DEFAULT_STEP) in median_tps else None,
    }


def report(result: dict[str, Any]) -> str:
    stop, tps = result["time_to_stop_s"], result["prefill_tps"]

    def seconds(values: list[float]) -> str:
        return ", ".join(f"{v:.2f}" for v in values)

    lines = [
        f"Esc during the prefill of a {result['prompt_tokens']:,}-token prompt, tiny model, in-process "
        f"(cancel {result['cancel_after_s']:g} s after the start, median of {result['runs']})",
        "",
        f"  time to stop, paced steps (~{result['paced_step_s']:g} s)   {stop['paced']['median']:.2f} s"
        f"   ({seconds(stop['paced']['all'])})",
        f"  time to stop, mlx_lm 2048-token steps   {stop['mlx_lm_2048']['median']:.2f} s"
        f"   ({seconds(stop['mlx_lm_2048']['all'])})",
        "",
        "  prefill tokens/s by step",
    ]
    for name, figures in tps.items():
        label = "paced (the runtime)" if name == "paced" else f"{int(name):>5} tokens (mlx_lm)"
        lines.append(f"    {label:<22}{figures['median']:8.0f}   ({', '.join(f'{v:.0f}' for v in figures['all'])})")
    if result["paced_vs_2048"] is not None:
        lines += ["", f"  paced / 2048 prefill speed: {result['paced_vs_2048']:.2f}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=3000, help="prompt length (default 3000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure; medians are reported (default 3)")
    parser.add_argument("--cancel-after", type=float, default=0.5, help="seconds into the prefill (default 0.5)")
    parser.add_argument(
        "--steps", type=lambda text: [int(s) for s in text.split(",")], default=[2048, 512, 256, 128, 64],
        help="mlx_lm prefill steps to time, comma-separated (default 2048,512,256,128,64)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    result = run(args)
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
