"""Permutation and reshape arithmetic for moving a Transpose past other ops
(:mod:`.layout`): functions of permutations, shapes and reshape targets."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir


def transpose_perm(node: ir.Node, r: int | None) -> list[int] | None:
    attr = node.attributes.get("perm")
    if attr is not None:
        return list(attr.as_ints())
    return list(reversed(range(r))) if r is not None else None


def inverse_perm(perm: list[int]) -> list[int]:
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return inverse


def relaid_shape(shape: ir.Shape | None, perm: list[int]) -> ir.Shape | None:
    """The shape of x when ``shape`` is that of transpose(x, perm)."""
    if shape is None:
        return None
    dims = list(shape)
    return ir.Shape([dims[i] for i in inverse_perm(perm)])


def reshape_groups(src: tuple[int, ...], dst: tuple[int, ...]) -> list[tuple[list[int], list[int]]] | None:
    """Reshape ``src`` -> ``dst`` as consecutive groups (source axes, destination axes) of
    equal sizes, smallest first: equal dims matched one to one, a size-1 axis inserted
    (no source axes) or removed (no destination axes), else axes merged or split until
    the sizes agree. None when the sizes never agree (or a dim is 0)."""
    if 0 in src or 0 in dst:
        return None
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        if i < len(src) and j < len(dst) and src[i] == dst[j]:
            groups.append(([i], [j]))
            i, j = i + 1, j + 1
        elif j < len(dst) and dst[j] == 1:
            groups.append(([], [j]))
            j += 1
        elif i < len(src) and src[i] == 1:
            groups.append(([i], []))
            i += 1
        elif i < len(src) and j < len(dst):
            ins, outs, a, b = [i], [j], src[i], dst[j]
            i, j = i + 1, j + 1
            while a != b:
                if a < b and i < len(src):
                    ins.append(i)
                    a, i = a * src[i], i + 1
                elif a > b and j < len(dst):
                    outs.append(j)
                    b, j = b * dst[j], j + 1
                else:
                    return None
            groups.append((ins, outs))
        else:
            return None
    return groups


def reshaped_dims(src: tuple[int, ...], target: np.ndarray | None, allowzero: int) -> tuple[int, ...] | None:
    """The shape ONNX Reshape makes of ``src`` with the constant ``target`` (0 copies the
    dim unless ``allowzero``, -1 is inferred), or None when it cannot be read."""
    if target is None or target.ndim != 1 or target.dtype != np.int64:
        return None
    dims = [int(d) for d in target]
    if not allowzero:
        dims = [src[k] if d == 0 and k < len(src) else d for k, d in enumerate(dims)]
    if dims.count(-1) == 1:
        known = int(np.prod([d for d in dims if d != -1]))
        if known <= 0 or int(np.prod(src)) % known:
            return None
        dims[dims.index(-1)] = int(np.prod(src)) // known
    if any(d < 0 for d in dims) or int(np.prod(dims)) != int(np.prod(src)):
        return None
    return tuple(dims)


def reshape_before(src: tuple[int, ...], dst: tuple[int, ...], perm: list[int]):
    """(target, after): ``reshape(transpose(x, perm), dst)`` is ``transpose(reshape(x,
    target), after)`` when every group of axes the Reshape merges or splits stays
    together and in order in x (``src`` being transpose(x, perm)'s shape); else None.
    An inserted size-1 axis goes with the group after it (the last group when none)."""
    groups = reshape_groups(src, dst)
    if groups is None:
        return None
    anchored, pending = [], []  # (position in x, destination axes) of the groups kept
    for ins, outs in groups:
        if ins and any(perm[k] != perm[ins[0]] + t for t, k in enumerate(ins)):
            return None
        if not ins:
            pending.extend(outs)
        elif outs:
            anchored.append((perm[ins[0]], pending + outs))
            pending = []
    if pending:
        if not anchored:
            return None
        anchored[-1] = (anchored[-1][0], anchored[-1][1] + pending)
    order = [j for _, outs in sorted(anchored) for j in outs]
    return [dst[j] for j in order], inverse_perm(order)


def size1_relaid(shape: tuple[int, ...] | None, r: int, perm: list[int]) -> list[int] | None:
    """The static ``shape`` (broadcast against rank ``r``) re-laid out as transpose's
    input when the re-layout only moves size-1 axes, so a Reshape makes it (a
    squeeze-excite gate [N, 1, 1, C] computed by Linear layers, as [N, C, 1, 1]); else None."""
    if shape is None or len(shape) > r:
        return None
    full = (1,) * (r - len(shape)) + tuple(shape)
    kept = [perm[k] for k in range(r) if full[k] != 1]
    if kept != sorted(kept):
        return None
    return [full[k] for k in inverse_perm(perm)]
