"""One ONNX graph from two exported ones, the second run only when a flag says so: the
decoder of an encoder-decoder package computes the cross-attention keys and values from
the encoder's states at its first step and takes them from its past afterwards (the
``use_cache_branch`` convention of Optimum's merged decoders, which transformers.js
feeds), so that no later step pays for them. Built on onnx_ir, so weights of any size
stay where they are."""

from __future__ import annotations

import onnx_ir as ir


def _value(name: str, like: ir.Value) -> ir.Value:
    return ir.Value(name=name, type=like.type, shape=like.shape)


def cached_or_computed(
    main: ir.Model, first: ir.Model, past: dict[str, str], flag: str = "use_cache_branch", prefix: str = "first/"
) -> ir.Model:
    """``main`` (changed in place and returned) with its inputs that ``first`` outputs
    (same names) taken from an If on the bool input ``flag``: when true, the graph inputs
    ``past[name]`` passed through; else ``first`` computed from its inputs, which become
    graph inputs. Each is also a graph output, named as ``past[name]`` with
    ``past_key_values`` read as ``present``. ``first``'s values are renamed under
    ``prefix`` (nothing in a branch may shadow the outer graph) and its weights move to
    the outer graph."""
    graph, sub = main.graph, first.graph
    computed = [v.name for v in sub.outputs]
    inputs = {v.name: v for v in graph.inputs}
    for value in list(sub.inputs):  # the branch reads the outer graph's inputs
        if value.name not in inputs:
            inputs[value.name] = _value(value.name, value)
            graph.inputs.append(inputs[value.name])
        value.replace_all_uses_with(inputs[value.name])
    for node in sub:
        for out in node.outputs:
            out.name = prefix + out.name
    for name, weight in list(sub.initializers.items()):
        sub.initializers.pop(name)
        weight.name = prefix + name
        graph.register_initializer(weight)
    nodes, outputs = list(sub), list(sub.outputs)
    sub.remove(nodes)
    sub.outputs.clear()
    else_graph = ir.Graph([], outputs, nodes=nodes, name="computed")
    passed = {name: _value(past[name], inputs[name]) for name in computed}
    then_nodes = [
        ir.Node("", "Identity", [passed[name]], outputs=[_value(f"cached/{name}", inputs[name])]) for name in computed
    ]
    then_graph = ir.Graph([], [n.outputs[0] for n in then_nodes], nodes=then_nodes, name="cached")
    flag_value = ir.Value(name=flag, type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([1]))
    branch = ir.Node(
        "",
        "If",
        [flag_value],
        [ir.AttrGraph("then_branch", then_graph), ir.AttrGraph("else_branch", else_graph)],
        num_outputs=len(computed),
    )
    present = []
    for out, name in zip(branch.outputs, computed):
        cached = inputs[name]  # the step's input, now the If's output
        cached.name = f"replaced/{name}"
        out.name, out.type, out.shape = name, cached.type, cached.shape
        cached.replace_all_uses_with(out)
        graph.inputs.remove(cached)
        graph.inputs.append(passed[name])
        present.append(
            ir.Node(
                "",
                "Identity",
                [out],
                outputs=[_value(past[name].replace("past_key_values", "present", 1), passed[name])],
            )
        )
    graph.inputs.append(flag_value)
    graph.insert_before(graph.node(0), branch)
    graph.extend(present)
    graph.outputs.extend(n.outputs[0] for n in present)
    return main
