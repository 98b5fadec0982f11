"""A second device on a machine that has only a CPU, for testing what runs a model on a GPU.

Inside :func:`second_device`, ``.to("meta")`` (on a tensor or a module) and a factory given ``device="meta"``
make tensors that say they are on ``meta`` but hold CPU data. Every operation on them computes on that data,
and raises as CUDA would where one operation mixes such a tensor with a CPU tensor of one or more dimensions
("Expected all tensors to be on the same device"); as on CUDA, a CPU scalar (0 dimensions) and the indices of an
indexing operation may be on the CPU. ``.cpu()`` and ``.to("cpu")`` give CPU tensors back; ``.item()`` and
``.tolist()`` work, and ``.numpy()`` raises, as they do on CUDA.

What it cannot show: CUDA's own kernels, their rounding and determinism, CUDA generators (``torch.Generator``
of a device is not made here) and anything that asks ``torch.cuda`` itself. A view taken under
``torch.inference_mode`` is beyond such a tensor: a test replaces it with ``torch.no_grad``, which computes the
same numbers. It shows where a tensor was left behind on the CPU, the mistake that two reviews of the device
paths found most often.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves, tree_map

DEVICE = torch.device("meta")  # a device without kernels or device guards, so that its name is all it lends
# indexing operations may take their indices, their second argument, from the CPU, on CUDA too
INDEXING = {
    torch.ops.aten.index.Tensor,
    torch.ops.aten.index_put_.default,
    torch.ops.aten.index_put.default,
    torch.ops.aten._index_put_impl_.default,
}


class Elsewhere(torch.Tensor):
    """CPU data that says it is on :data:`DEVICE`."""

    @staticmethod
    def __new__(cls, data: torch.Tensor):
        wrapper = torch.Tensor._make_wrapper_subclass(
            cls,
            data.shape,
            strides=data.stride(),
            storage_offset=data.storage_offset(),
            dtype=data.dtype,
            layout=data.layout,
            device=DEVICE,
            requires_grad=data.requires_grad,
        )
        wrapper.data_on_cpu = data
        return wrapper

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __repr__(self) -> str:
        return f"Elsewhere({self.data_on_cpu!r})"

    def tolist(self):
        return self.data_on_cpu.tolist()

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._to_copy.default and is_cpu(kwargs.get("device")):
            return func(args[0].data_on_cpu, *args[1:], **kwargs)
        if func is torch.ops.aten.copy_.default:  # a copy between devices is how tensors move: allowed
            func(unwrap(args[0]), unwrap(args[1]), *args[2:], **kwargs)
            return args[0]
        check_one_device(func, args, kwargs)
        inner_args, inner_kwargs = tree_map(unwrap, (args, kwargs))
        if is_elsewhere(inner_kwargs.get("device")):  # a factory of this device's: its numbers are made on the CPU
            inner_kwargs["device"] = torch.device("cpu")
        return tree_map(wrap, func(*inner_args, **inner_kwargs))


def is_cpu(device) -> bool:
    return device is not None and torch.device(device).type == "cpu"


def is_elsewhere(device) -> bool:
    return isinstance(device, str | torch.device) and torch.device(device) == DEVICE


def unwrap(value):
    return value.data_on_cpu if isinstance(value, Elsewhere) else value


def wrap(value):
    return Elsewhere(value) if isinstance(value, torch.Tensor) and not isinstance(value, Elsewhere) else value


def check_one_device(func, args, kwargs) -> None:
    """Raise as CUDA would for an operation on tensors of two devices."""
    checked = [arg for position, arg in enumerate(args) if not (func in INDEXING and position == 1)]
    tensors = [t for t in tree_leaves((checked, kwargs)) if isinstance(t, torch.Tensor)]
    on_cpu = [t for t in tensors if not isinstance(t, Elsewhere) and t.dim() > 0]
    if on_cpu and len(on_cpu) < len(tensors):
        raise RuntimeError(f"Expected all tensors to be on the same device, but found meta and cpu ({func})")


def list_indices_on_cpu(index):
    """A list in an index made a CPU tensor: torch would make it on the indexed tensor's device, here ``meta``,
    which holds no numbers (on CUDA it would hold them; a CPU index is as good there)."""
    if isinstance(index, list):
        return torch.tensor(index)
    if isinstance(index, tuple):
        return tuple(torch.tensor(part) if isinstance(part, list) else part for part in index)
    return index


class MovesToSecondDevice(TorchFunctionMode):
    """Turns ``.to(DEVICE)`` and factories given ``device=DEVICE`` into :class:`Elsewhere` tensors."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and isinstance(args[0], Elsewhere):
            args = (args[0], list_indices_on_cpu(args[1]), *args[2:])
        if func is torch.Tensor.to and any(is_elsewhere(a) for a in (*args[1:], kwargs.get("device"))):
            source, dtype = (
                args[0],
                kwargs.get("dtype") or next((a for a in args[1:] if isinstance(a, torch.dtype)), None),
            )
            data = unwrap(source) if dtype is None else unwrap(source).to(dtype)
            if isinstance(source, Elsewhere) and data is source.data_on_cpu:
                return source
            return Elsewhere(data.detach().clone()).requires_grad_(source.requires_grad)
        if is_elsewhere(kwargs.get("device")):
            return wrap(func(*args, **(kwargs | {"device": "cpu"})))
        return func(*args, **kwargs)


@contextmanager
def second_device():
    """While open, :data:`DEVICE` behaves as a second device (see the module's docstring)."""
    with MovesToSecondDevice():
        yield DEVICE
