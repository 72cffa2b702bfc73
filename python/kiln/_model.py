"""What every entry point accepts as a model: a path, ONNX bytes, an onnx.ModelProto, or a
torch.nn.Module with example inputs (exported here with the legacy TorchScript exporter, every
shape bound from the examples, so no dynamic axis is left for the compiler to guess)."""

import io
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence, Tuple

from kiln.errors import InvalidInputError

Shapes = Dict[str, Tuple[int, ...]]


@dataclass
class ModelSource:
    """A model ready for the compiler or an upload: a file (`path`) or its bytes (`data`)."""

    name: str
    path: Optional[str] = None
    data: Optional[bytes] = None
    input_shapes: Shapes = field(default_factory=dict)

    def size(self) -> int:
        return os.path.getsize(self.path) if self.path is not None else len(self.data)

    def open(self):
        """A binary file object over the model (read in chunks by uploads)."""
        return open(self.path, "rb") if self.path is not None else io.BytesIO(self.data)


def normalize_shapes(input_shapes: Optional[Dict[str, Sequence[int]]]) -> Shapes:
    """{name: (d0, d1, ...)} with every dimension a positive int; InvalidInputError naming the
    input otherwise."""
    out: Shapes = {}
    for name, dims in (input_shapes or {}).items():
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"input_shapes: an input name must be a non-empty string, got {name!r}")
        try:
            shape = tuple(int(d) for d in dims)
        except (TypeError, ValueError):
            raise InvalidInputError(f"input_shapes['{name}']: a shape is a sequence of ints, got {dims!r}") from None
        if any(d <= 0 for d in shape):
            raise InvalidInputError(f"input_shapes['{name}']: every dimension must be positive, got {list(shape)}")
        out[name] = shape
    return out


def _is_torch_module(model: Any) -> bool:
    # A user holding a torch module has imported torch; Kiln never imports it otherwise.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


def _export_torch(module, example_inputs, input_names, opset: int) -> Tuple[bytes, Shapes]:
    import torch

    if example_inputs is None:
        raise InvalidInputError(
            "a torch.nn.Module needs example_inputs (a tensor or a tuple of them) to be exported to ONNX")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    for i, t in enumerate(example_inputs):
        if not isinstance(t, torch.Tensor):
            raise InvalidInputError(f"example_inputs[{i}] must be a torch.Tensor, got {type(t).__name__}")
    names = list(input_names) if input_names else [f"input{i}" if len(example_inputs) > 1 else "input"
                                                   for i in range(len(example_inputs))]
    if len(names) != len(example_inputs):
        raise InvalidInputError(
            f"input_names has {len(names)} names for {len(example_inputs)} example inputs")
    buf = io.BytesIO()
    was_training = module.training
    module.eval()
    try:
        kwargs = dict(input_names=names, opset_version=opset, do_constant_folding=True)
        with warnings.catch_warnings():
            # torch >= 2.9 warns that the TorchScript exporter is legacy; it is the one whose
            # output needs no onnxscript, and every shape is bound here anyway.
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                torch.onnx.export(module, example_inputs, buf, dynamo=False, **kwargs)
            except TypeError:  # a torch before the dynamo flag
                torch.onnx.export(module, example_inputs, buf, **kwargs)
    finally:
        module.train(was_training)
    shapes = {n: tuple(t.shape) for n, t in zip(names, example_inputs)}
    return buf.getvalue(), shapes


def model_source(model: Any, *, input_shapes=None, example_inputs=None, input_names=None,
                 name: Optional[str] = None, opset: int = 17) -> ModelSource:
    """The model as the compiler and the farm take it; InvalidInputError for anything else."""
    shapes = normalize_shapes(input_shapes)
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise InvalidInputError(f"{path}: no such model file")
        base = os.path.splitext(os.path.basename(path))[0]
        return ModelSource(name=name or base, path=path, input_shapes=shapes)
    if isinstance(model, (bytes, bytearray, memoryview)):
        return ModelSource(name=name or "model", data=bytes(model), input_shapes=shapes)
    if type(model).__name__ == "ModelProto" and hasattr(model, "SerializeToString"):
        graph_name = getattr(getattr(model, "graph", None), "name", "") or "model"
        return ModelSource(name=name or graph_name, data=model.SerializeToString(), input_shapes=shapes)
    if _is_torch_module(model):
        data, example_shapes = _export_torch(model, example_inputs, input_names, opset)
        example_shapes.update(shapes)
        return ModelSource(name=name or type(model).__name__.lower(), data=data,
                           input_shapes=example_shapes)
    raise InvalidInputError(
        "a model is a path to an .onnx file, its bytes, an onnx.ModelProto, or a torch.nn.Module "
        f"with example_inputs; got {type(model).__name__}")
