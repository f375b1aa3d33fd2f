"""``mlx2onnx inspect TARGET``: what an export would contain, without exporting."""

from __future__ import annotations

import json

from .common import (
    EXIT_EXPORT,
    EXIT_OK,
    capture_traced,
    fmt_bytes,
    spec_text,
    target_and_inputs,
)
from .progress import Progress


# -- inspect ---------------------------------------------------------------------------------
def cmd_inspect(ns, progress: Progress) -> int:
    from ..capture import records
    from ..translate import registry

    fun, args, kwargs, label = target_and_inputs(ns)
    trace = capture_traced(fun, args, kwargs, progress)
    counts = trace.primitive_counts()
    status = {}
    for name in counts:
        if registry.lookup(name) is not None:
            status[name] = "handled"
        elif registry.refusal(name) is not None:
            status[name] = "refused"
        else:
            status[name] = "no handler"
    const_bytes = sum(c.spec.size * c.spec.dtype.size for c in trace.constants)
    missing = sorted(n for n, s in status.items() if s == "no handler")
    refused = sorted(n for n, s in status.items() if s == "refused")
    if ns.json:
        data = {
            "function": trace.function_name,
            "device": trace.device,
            "inputs": [
                {"name": i.label, "shape": list(i.spec.shape), "dtype": spec_text(i.spec).split("[")[0]}
                for i in trace.inputs
            ],
            "outputs": [
                {
                    "name": o.label or f"output_{k}",
                    "shape": list(o.spec.shape),
                    "dtype": spec_text(o.spec).split("[")[0],
                }
                for k, o in enumerate(trace.outputs)
            ],
            "primitives": {n: {"count": c, "status": status[n]} for n, c in sorted(counts.items())},
            "no_handler": missing,
            "refused": {n: str(registry.refusal(n)) for n in refused},
            "constants": {"count": len(trace.constants), "bytes": const_bytes},
        }
        if ns.records:
            data["records"] = [
                {
                    "index": p.index,
                    "name": p.name,
                    "arguments": {
                        k: records.format_value(v, limit=10_000) for k, v in records.named(p.name, p.arguments).items()
                    },
                    "inputs": [spec_text(s) for s in p.inputs],
                    "outputs": [spec_text(s) for s in p.outputs],
                }
                for p in trace.primitives
            ]
        print(json.dumps(data, indent=2))
    else:
        print(f"{label} ({trace.function_name}) traced on {trace.device}")
        print("inputs:  " + ", ".join(f"{i.label} {spec_text(i.spec)}" for i in trace.inputs))
        print(
            "outputs: "
            + ", ".join(f"{o.label or f'output_{k}'} {spec_text(o.spec)}" for k, o in enumerate(trace.outputs))
        )
        print(f"constants: {len(trace.constants)} ({fmt_bytes(const_bytes)})")
        print(f"primitives: {len(trace.primitives)} records, {len(counts)} kinds")
        width = max((len(n) for n in counts), default=4)
        for name, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {name:<{width}}  {count:>5}  {status[name]}")
        if missing:
            print(f"no handler: {', '.join(f'{n} (x{counts[n]})' for n in missing)}")
        for name in refused:
            print(f"refused: {name} (x{counts[name]}): {registry.refusal(name)}")
        if not missing and not refused:
            print("every primitive has a handler")
        if ns.records:
            print("records:")
            for p in trace.primitives:
                ins = ", ".join(f"{s.name} {spec_text(s)}" for s in p.inputs)
                outs = ", ".join(f"{s.name} {spec_text(s)}" for s in p.outputs)
                decoded = records.describe(p.name, p.arguments)
                print(f"  {p.index:>4}  {p.name}{' ' + decoded if decoded else ''}  ({ins}) -> ({outs})")
    return EXIT_EXPORT if missing or refused else EXIT_OK
