"""The default model's derivation, run as a child process of its own so that a closing workspace can stop it.

`python -m codeloupe.embed.derive SOURCE OUT PARENT_PID [--unsigned]` folds the shipped model's
dequantise-on-the-fly nodes, re-quantises its MatMuls into true int8 ones, edits the graph
(`codeloupe.embed.model_graph`) and writes the result to OUT; `codeloupe.embed.local.requantized_model` starts it,
checks what it wrote and moves it into the cache. Killed midway it leaves only what is in OUT's folder (the
parent's work dir, which the parent removes), and it dies with its parent (`parallel.exit_with_parent`).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from codeloupe.parallel import exit_with_parent


class _DropPreprocessAdvice(logging.Filter):
    """quantize_dynamic advises pre-processing on the root logger at WARNING; it does not apply here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def derive(source: Path, out: Path, *, unsigned: bool) -> None:
    """Write the re-quantised, edited model of `source` to `out`; `unsigned`: its weights as uint8 + 128."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from codeloupe.embed import model_graph  # needs onnx, like the quantiser

    logging.getLogger().addFilter(_DropPreprocessAdvice())
    # Fold the shipped dequantise-on-the-fly nodes (Cast, Mul) into float weights first; the quantiser then turns
    # those MatMuls into integer ones.
    folded = out.with_name("folded.onnx")
    fold = ort.SessionOptions()
    fold.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    fold.optimized_model_filepath = str(folded)
    ort.InferenceSession(str(source), fold, providers=["CPUExecutionProvider"])
    # Per-channel weight scales: cosine to the float32 model 0.994 instead of 0.963 per-tensor, at the same speed
    # (bench/embed_bench.py).
    quantize_dynamic(folded, out, weight_type=QuantType.QInt8, per_channel=True)
    model_graph.simplify(out)
    if unsigned:
        model_graph.unsigned_weights(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m codeloupe.embed.derive")
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("parent_pid", type=int)
    parser.add_argument("--unsigned", action="store_true")
    args = parser.parse_args(argv)
    exit_with_parent(args.parent_pid)
    derive(args.source, args.out, unsigned=args.unsigned)


if __name__ == "__main__":
    main()
