"""Which files of a Hugging Face model folder are read, from where, and how: the loader reads only these.

- ``config.json``, ``generation_config.json``, the tokenizer's files (:data:`TEXT_FILES`) and the index
  ``model.safetensors.index.json``: read whole through the untrusted-file reader
  (:func:`~induction_probes.circuits.untrusted.read_bytes`: regular files, no link below the folder,
  a size checked before the first byte is read);
- the weights, ``model.safetensors`` or the shards the index names: plain file names ending ``.safetensors``,
  regular files inside the folder, :data:`~induction_probes.circuits.limits.MAX_LM_WEIGHT_BYTES` in all;
  memory-mapped by safetensors when the model loads; only their headers are read here, for the dtypes of their
  tensors (one that is not floating point loads cast to float32, with a :class:`CastWeightsWarning`).

A model in the local Hugging Face cache is read the same way: each file is found through huggingface_hub's
own cache lookup, and the blob a snapshot's link leads to must be a regular file inside the cache's folder
of that model. The files read are copied (the weights linked) into a private temporary folder, and that
folder is what transformers is given, so nothing else of the model's folder is ever opened: no pickle, no
code, no adapter config, no file the index names outside the folder.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import MAX_LM_PARAMETERS, MAX_LM_WEIGHT_BYTES, MAX_TEXT_BYTES
from induction_probes.circuits.untrusted import (
    CheckpointError,
    NotFiniteError,
    not_a_number,
    read_bytes,
    refuse_links_below,
)

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
TOKENIZER_JSON = "tokenizer.json"
# what AutoTokenizer reads of a fast (tokenizer.json), byte-level BPE (vocab.json, merges.txt), WordPiece
# (vocab.txt) or SentencePiece (tokenizer.model) tokenizer; chat templates are never needed here
TOKENIZER_FILES = (
    TOKENIZER_JSON,
    TOKENIZER_CONFIG,
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "tokenizer.model",
)
# the files of those that hold a tokenizer's vocabulary: the others (its config, special tokens, merges) alone
# make a tokenizer only of a class that needs no vocabulary (ByT5's bytes)
TOKENIZER_VOCABULARIES = (TOKENIZER_JSON, "vocab.json", "vocab.txt", "tokenizer.model")
TEXT_FILES = (CONFIG, "generation_config.json", *TOKENIZER_FILES)
# safetensors' codes of the dtypes that are not floating point, and torch's names of them: such weights load
# cast to float32, their values kept but not what they meant (quantized weights lose the scales they need)
NON_FLOAT_DTYPES = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "U16": "uint16",
    "I16": "int16",
    "U32": "uint32",
    "I32": "int32",
    "U64": "uint64",
    "I64": "int64",
}
QUOTED = 200  # characters of a stranger's value or of a library's message kept in one error line
MAX_HEADER_BYTES = 100 * 2**20  # the safetensors format's own limit on a file's header
# causal masks that older transformers saved among GPT-2's and GPT-NeoX's weights (attn.bias, attn.masked_bias):
# buffers the model rebuilds, not weights, so a checkpoint holding them matches its config all the same
STALE_BUFFER = re.compile(r"(^|\.)(attn|attention)\.(bias|masked_bias)$")


class LanguageModelError(BadInput):
    """A language model that cannot be found, read or booted."""


class CastWeightsWarning(UserWarning):
    """Weights stored as integers or booleans, loaded all the same: cast to float32."""


def one_line(error: BaseException | str, limit: int = QUOTED) -> str:
    """An error's message on one line (its lines joined), cut after ``limit`` characters: a message may quote
    a stranger's file, which may be one enormous value."""
    text = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    text = text or type(error).__name__
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass(frozen=True)
class ModelFolder:
    """Where one model's files are read from: a directory of its own files, or one revision of a model in
    the local Hugging Face cache. Nothing outside ``root`` is read."""

    root: Path  # the directory the user named (it may itself be a link), or the cache's folder of the model
    name: str  # how messages name the model
    repo_id: str | None = None  # a model in the cache
    revision: str | None = None

    @classmethod
    def cache(cls, repo_id: str, revision: str | None, name: str) -> ModelFolder:
        # the Hugging Face hub's cache layout, read only for a cache name (not for a folder on disk)
        from huggingface_hub import constants
        from huggingface_hub.file_download import repo_folder_name

        folder = Path(constants.HF_HUB_CACHE, repo_folder_name(repo_id=repo_id, repo_type="model"))
        return cls(folder.resolve(), name, repo_id, revision)

    def find(self, file: str) -> Path | None:
        """Where the model's file ``file`` is, or None where it has none: in a directory, the path itself (a
        link there is refused when it is read); in the cache, the blob its snapshot's link leads to."""
        if self.repo_id is None:
            path = self.root / file
            return path if os.path.lexists(path) else None
        from huggingface_hub import try_to_load_from_cache  # only for a cache name, as above

        found = try_to_load_from_cache(self.repo_id, file, revision=self.revision)
        if not isinstance(found, str):
            return None
        blob = Path(os.path.realpath(found))  # a snapshot's files are links into blobs/, by Hugging Face's design
        if not blob.is_relative_to(self.root):
            raise LanguageModelError(f"{found} leads outside the cache's folder of {self.repo_id}")
        return blob

    def read(self, file: str) -> bytes | None:
        """The bytes of ``file``, read through the untrusted-file reader; None where the model has none."""
        path = self.find(file)
        return None if path is None else read_bytes(path, MAX_TEXT_BYTES, root=self.root)

    def weights_size(self, file: str) -> tuple[Path, int]:
        """The path and size of the weights file ``file``: a regular file below ``root``, no link on the way."""
        path = self.find(file)
        if path is None:
            raise LanguageModelError(f"{self.name} has no weights file {file} (named by {INDEX})")
        refuse_links_below(self.root, path)  # as read_bytes does for the files it reads
        status = path.stat()  # no link on the way: the file's own status
        if not stat.S_ISREG(status.st_mode):
            raise LanguageModelError(f"{path} is not a regular file: weights are read from regular files only")
        return path, status.st_size


@dataclass(frozen=True)
class ModelFiles:
    """The files of one model that the loader reads: checked, and nothing else."""

    texts: dict[str, bytes]  # config, index and tokenizer files, as read
    weights: dict[str, Path]  # the safetensors files, checked but not read

    def json(self, file: str) -> dict | None:
        return None if file not in self.texts else json_object(self.texts[file])

    @property
    def config(self) -> dict:
        """config.json's object: every model's files hold one (:func:`read_model_folder` refuses a folder without)."""
        return json_object(self.texts[CONFIG])

    @property
    def tokenizer_files(self) -> list[str]:
        return [file for file in TOKENIZER_FILES if file in self.texts]

    @property
    def has_vocabulary(self) -> bool:
        return any(file in self.texts for file in TOKENIZER_VOCABULARIES)

    def tensors(self) -> dict[str, tuple[str, list[int], Path]]:
        """Every tensor of the weights: name -> (safetensors' dtype code, shape, its file), from the headers alone."""
        found = {}
        for path in self.weights.values():
            found |= {name: (entry["dtype"], entry["shape"], path) for name, entry in tensor_header(path).items()}
        return found

    def non_float_tensors(self) -> dict[str, tuple[str, Path]]:
        """The weights' tensors stored in a dtype that is not floating point: name -> (torch's name of that
        dtype, its file), from the safetensors headers alone."""
        stored = self.tensors().items()
        return {name: (NON_FLOAT_DTYPES[code], path) for name, (code, _, path) in stored if code in NON_FLOAT_DTYPES}

    def parameter_count(self) -> int:
        """The weights' numbers, from the headers: the parameters as saved (tied embeddings once), without the
        causal masks older transformers saved beside them."""
        stored = self.tensors().items()
        count = sum(math.prod(shape) for name, (_, shape, _) in stored if not STALE_BUFFER.search(name))
        if count > MAX_LM_PARAMETERS:  # a header states what it likes: its count is checked as a config's is
            raise LanguageModelError(
                f"the weights' headers state {count:.3g} parameters, above the limit of {MAX_LM_PARAMETERS:,} "
                "(circuits/limits.py)"
            )
        return count


def tensor_header(path: Path) -> dict[str, dict]:
    """A safetensors file's header (name -> dtype code and shape; its metadata left out), read without torch:
    its stated length is checked against the format's own limit and the file's size before it is read.
    ``path`` was checked to be a regular file inside the model's folder (:meth:`ModelFolder.weights_size`)."""
    with open(path, "rb") as file:
        stated = file.read(8)
        length = int.from_bytes(stated, "little") if len(stated) == 8 else 0
        if not 0 < length <= min(MAX_HEADER_BYTES, os.fstat(file.fileno()).st_size - 8):
            raise LanguageModelError(f"{path} is not a safetensors file: its header length does not fit the file")
        try:
            header = json_object(file.read(length))
        except ValueError as error:
            raise LanguageModelError(f"{path} is not a safetensors file: its header is {error}") from None
    header.pop("__metadata__", None)
    for name, entry in header.items():
        shape = entry.get("shape") if isinstance(entry, dict) else None
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        if not (isinstance(dtype, str) and isinstance(shape, list) and len(shape) <= MAX_DIMS):
            raise LanguageModelError(f"{path}: tensor {one_line(name)} has no dtype and shape in its header")
        if not all(is_size(n) for n in shape):
            raise LanguageModelError(f"{path}: tensor {one_line(name)} has a shape entry that is no size below 2^40")
    return header


MAX_DIMS = 8  # a tensor's dimensions in a header: a model's weights have at most 4
MAX_DIM = 1 << 40  # one dimension's size: far above any model's, far below a number too long to print


def is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_DIM


def read_model_folder(folder: ModelFolder) -> ModelFiles:
    """The files of ``folder`` the loader reads (:data:`TEXT_FILES`, the index, the weights), each checked;
    a :class:`LanguageModelError` naming the file for the first that breaks a rule."""
    try:
        config = folder.read(CONFIG)  # first: a folder without one is no model, whatever else it holds
        if config is None:
            raise LanguageModelError(f"{folder.name} has no {CONFIG}")
        texts = {CONFIG: config} | {file: data for file in TEXT_FILES[1:] if (data := folder.read(file)) is not None}
        if folder.find(WEIGHTS) is not None:  # transformers' own choice when a folder has both
            shards = [WEIGHTS]
        elif (index := folder.read(INDEX)) is not None:
            texts[INDEX] = index
            with as_model_error(f"{folder.name}: {INDEX}"):
                shards = shard_files(json_object(index))
        else:
            raise LanguageModelError(
                f"{folder.name} has no safetensors weights: only safetensors are loaded (never a pickle)"
            )
        return ModelFiles(texts, checked_weights(folder, shards))
    except (CheckpointError, OSError) as error:  # the untrusted-file reader's refusals, a file that went away
        raise LanguageModelError(one_line(error)) from None


def json_object(data: bytes) -> dict:
    """``data`` as a JSON object: strict JSON (no NaN, no Infinity, no number too large for a float), not
    nested past Python's recursion limit;
    else a ``ValueError`` saying why."""
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=not_a_number, parse_float=finite_float)
    except (ValueError, RecursionError) as error:  # not UTF-8, not JSON, NaN, nested too deep
        raise BadInput(f"not strict JSON ({one_line(error)})") from None
    if not isinstance(value, dict):
        raise BadInput("not a JSON object")
    return value


def finite_float(text: str) -> float:
    """``json.loads``'s reader of numbers such as ``1e999``, which Python would read as infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise NotFiniteError(text)
    return value


def shard_files(index: dict) -> list[str]:
    """The files an index's ``weight_map`` names: each a plain file name ending ``.safetensors``, which can only
    name a file inside the folder itself (no separator, so no ``..`` and no absolute path) and never a pickle."""
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise BadInput("no weight_map naming the files of the weights")
    for file in weight_map.values():
        if not (isinstance(file, str) and file.endswith(".safetensors") and not set(file) & {"/", "\\", "\0"}):
            raise BadInput(
                f"names {one_line(repr(file))}: only safetensors files in the model's folder itself are read"
            )
    return sorted(set(weight_map.values()))


def checked_weights(folder: ModelFolder, files: list[str]) -> dict[str, Path]:
    """The weights files, each a regular file inside the folder, :data:`MAX_LM_WEIGHT_BYTES` in all."""
    sized = {file: folder.weights_size(file) for file in files}
    total = sum(size for _, size in sized.values())
    if total > MAX_LM_WEIGHT_BYTES:
        raise LanguageModelError(
            f"{folder.name} holds {total:,} bytes of weights, above the limit of {MAX_LM_WEIGHT_BYTES:,} "
            "(circuits/limits.py)"
        )
    return {file: path for file, (path, _) in sized.items()}


@contextmanager
def staged(files: ModelFiles) -> Iterator[Path]:
    """A private temporary folder holding the files read (the weights linked to the files checked), for
    transformers to load from: it can open nothing of the model's folder that was not checked."""
    with tempfile.TemporaryDirectory(prefix="induction-probes-model-") as folder:
        for file, data in files.texts.items():
            Path(folder, file).write_bytes(data)
        for file, path in files.weights.items():
            Path(folder, file).symlink_to(path.absolute())
        yield Path(folder)


@contextmanager
def as_model_error(where: str) -> Iterator[None]:
    """Whatever goes wrong inside (a check of ours, or transformers, safetensors, tokenizers or huggingface_hub
    reading a stranger's files) becomes one :class:`LanguageModelError` line that starts with ``where``: the
    folder is input, and its faults are bad input. Running out of memory, an interrupt and an exit are not the
    folder's fault and pass through."""
    try:
        yield
    except (LanguageModelError, MemoryError):
        raise
    except Exception as error:
        kind = (
            "" if isinstance(error, (ValueError, OSError)) else f"{type(error).__name__}: "
        )  # a KeyError's 'x' alone says little
        raise LanguageModelError(f"{where}: {kind}{one_line(error)}") from None
