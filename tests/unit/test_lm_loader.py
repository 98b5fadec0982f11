"""The Hugging Face model loader reads only what it promises (docs/bad-input.md, "Language-model folders").

Each hostile folder here is refused twice over: by the API, with a LanguageModelError, and by the command
line, with one line on stderr, status 2, nothing on stdout and nothing written. The folders are copies of
the tiny GPT-2, GPT-NeoX and Llama models of tests/lm_models.py (built once for the module), each edited in
one way a stranger could."""

import json
import os
import re
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from lm_models import (
    no_network,  # noqa: F401 (an autouse fixture: importing it applies it to this module)
    saved_models,
)
from safetensors.torch import load_file, save_file

from induction_probes import lm
from induction_probes.circuits.interop.language_models import load_pretrained
from induction_probes.circuits.interop.model_folder import CastWeightsWarning, LanguageModelError
from induction_probes.circuits.interop.model_sources import find_source

INDEX = "model.safetensors.index.json"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return saved_models(tmp_path_factory)


def copy_model(models, architecture, folder, **config_changes):
    """A copy of a tiny model (regular files), its config.json updated with ``config_changes``."""
    shutil.copytree(models[architecture], folder)
    if config_changes:
        edit_json(folder / "config.json", config_changes)
    return folder


def edit_json(path, changes):
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


def sharded(models, folder, second: str):
    """A GPT-2 copy whose weights are two shards and an index: the first shard in the folder, the second
    named ``second`` in the index (to be made by the caller); returns the second shard's tensors."""
    copy_model(models, "gpt2", folder)
    tensors = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    names = sorted(tensors)
    first = {name: tensors[name] for name in names[: len(names) // 2]}
    rest = {name: tensors[name] for name in names[len(names) // 2 :]}
    save_file(first, folder / "model-00001-of-00002.safetensors", metadata={"format": "pt"})
    weight_map = {name: "model-00001-of-00002.safetensors" for name in first} | {name: second for name in rest}
    (folder / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return rest


def cli(capsys, *argv):
    from induction_probes.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def listing(folder):
    return sorted((str(p.relative_to(folder)), p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*"))


def assert_refused(capsys, tmp_path, name, match):
    """``name`` (a model folder or cache name) is refused by the API and by the command line alike."""
    with pytest.raises(LanguageModelError, match=match) as refusal:
        lm.load_bridge(find_source(str(name)))
    assert "\n" not in str(refusal.value) and len(str(refusal.value)) < 600
    capsys.readouterr()  # what the API call printed (transformers' loading bar) is not the command line's
    plots = tmp_path / "plots"
    folder = Path(name) if Path(name).is_absolute() else None  # a model folder, not a cache name
    before = listing(folder) if folder is not None else None
    code, out, err = cli(capsys, "probe", str(name), "--n-seqs", "2", "--length", "8", "--plot", str(plots))
    assert code == 2 and out == "", err
    assert len(err.strip().splitlines()) == 1 and err.startswith("induction-probes: error: "), err
    assert not plots.exists() or not any(plots.iterdir())
    assert before is None or listing(folder) == before


# --- finding the model: a folder that is neither a model nor a run, a checkpoint that cannot be read ------


def test_a_folder_whose_config_has_no_model_type_is_neither_a_run_nor_a_model(models, tmp_path, capsys):
    folder = copy_model(models, "gpt2", tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    del config["model_type"]
    (folder / "config.json").write_text(json.dumps(config))
    assert_refused(
        capsys,
        tmp_path,
        folder,
        r"is neither a run of ours \(no manifest.json\) nor a Hugging Face model directory "
        r"\(its config.json has no model_type\)$",
    )


@pytest.mark.parametrize("kind", ["config a link", "config a named pipe", "no config", "folder a link", "a file"])
def test_a_checkpoint_folder_that_cannot_be_read_as_a_model_is_refused_not_left_out(models, tmp_path, capsys, kind):
    series = tmp_path / "series"
    for step in (1, 2, 3):
        copy_model(models, "gpt2", series / f"step_{step}")
    broken = series / "step_2"
    config = broken / "config.json"
    if kind == "config a link":
        config.unlink()
        config.symlink_to(models["gpt2"] / "config.json")
    elif kind == "config a named pipe":  # opened without waiting for a writer, then refused
        config.unlink()
        os.mkfifo(config)
    elif kind == "no config":
        config.unlink()
    else:
        shutil.rmtree(broken)
        if kind == "folder a link":
            broken.symlink_to(models["gpt2"], target_is_directory=True)
        else:
            broken.write_text("step 2")
    why = {
        "config a link": "config.json is a symbolic link",
        "config a named pipe": "config.json is not a regular file",
        "no config": "it has no config.json",
        "folder a link": "it is a symbolic link",
        "a file": "it is not a folder",
    }[kind]
    assert_refused(capsys, tmp_path, series, f"checkpoint {re.escape(str(broken))} cannot be read as a model: .*{why}")


# --- the index: safetensors files inside the folder only ------------------------------------------------


@pytest.mark.parametrize("kind", ["parent", "absolute", "device", "pickle", "subfolder", "not a name"])
def test_an_index_naming_a_file_outside_the_folder_or_a_pickle_is_refused_before_anything_is_read(
    models, tmp_path, capsys, kind
):
    outside = tmp_path / "elsewhere" / "shard.safetensors"
    outside.parent.mkdir()
    named = {
        "parent": "../outside.safetensors",
        "absolute": str(outside),
        "device": "/dev/zero",
        "pickle": "pytorch_model.bin",
        "subfolder": "sub/shard.safetensors",
        "not a name": 7,
    }[kind]
    rest = sharded(models, tmp_path / "model", named)
    save_file(rest, outside, metadata={"format": "pt"})
    save_file(rest, tmp_path / "outside.safetensors", metadata={"format": "pt"})
    torch.save(rest, tmp_path / "model" / "pytorch_model.bin")  # a pickle, which torch.load would run
    assert_refused(capsys, tmp_path, tmp_path / "model", "only safetensors files in the model's folder itself")


@pytest.mark.parametrize("kind", ["named pipe", "link", "folder"])
def test_an_index_naming_a_pipe_a_link_or_a_folder_inside_the_folder_is_refused(models, tmp_path, capsys, kind):
    rest = sharded(models, tmp_path / "model", "second.safetensors")
    second = tmp_path / "model" / "second.safetensors"
    if kind == "named pipe":  # safetensors would wait on it for ever
        os.mkfifo(second)
    elif kind == "link":
        save_file(rest, tmp_path / "real.safetensors", metadata={"format": "pt"})
        second.symlink_to(tmp_path / "real.safetensors")
    else:
        second.mkdir()
    match = "symbolic link" if kind == "link" else "not a regular file"
    assert_refused(capsys, tmp_path, tmp_path / "model", match)


def test_weights_beyond_the_size_limit_are_refused_by_their_size(models, tmp_path, capsys):
    from induction_probes.circuits.limits import MAX_LM_WEIGHT_BYTES

    folder = copy_model(models, "gpt2", tmp_path / "model")
    os.truncate(folder / "model.safetensors", MAX_LM_WEIGHT_BYTES + 1)  # sparse: nothing is written to disk
    assert_refused(capsys, tmp_path, folder, "bytes of weights, above the limit")


def test_a_sharded_model_loads_from_its_own_shards(models, tmp_path):
    rest = sharded(models, tmp_path / "model", "model-00002-of-00002.safetensors")
    save_file(rest, tmp_path / "model" / "model-00002-of-00002.safetensors", metadata={"format": "pt"})
    model, _ = load_pretrained(find_source(str(tmp_path / "model")))
    saved = load_file(models["gpt2"] / "model.safetensors")
    assert all(torch.equal(model.state_dict()[name], tensor) for name, tensor in saved.items())


# --- the config, the index and the tokenizer's files: through the untrusted-file reader ---------------------


@pytest.mark.parametrize(
    "file, kind",
    [
        ("tokenizer.json", "huge"),
        ("tokenizer_config.json", "link"),
        ("special_tokens_map.json", "named pipe"),
        ("generation_config.json", "named pipe"),
        ("vocab.json", "huge"),
        (INDEX, "link"),
    ],
)
def test_text_files_are_read_only_as_regular_files_of_a_sane_size(models, tmp_path, capsys, file, kind):
    folder = tmp_path / "model"
    if file == INDEX:  # an index is read only where there is no model.safetensors
        sharded(models, folder, "model-00001-of-00002.safetensors")
    else:
        copy_model(models, "llama", folder)
    path = folder / file
    path.unlink(missing_ok=True)
    if kind == "huge":  # 3 GiB, sparse: refused by its size before a byte of it is read
        with open(path, "wb") as handle:
            handle.truncate(3 << 30)
    elif kind == "link":
        (tmp_path / "real.json").write_text("{}")
        path.symlink_to(tmp_path / "real.json")
    else:
        os.mkfifo(path)
    match = {"huge": "larger than such a file can be", "link": "symbolic link", "named pipe": "not a regular file"}
    assert_refused(capsys, tmp_path, folder, match[kind])


# --- the config: sizes within the limits, checked before anything is built -------------------------------

CONFIGS = {
    "layers a word": ("gpt2", {"n_layer": "two"}, "n_layer must be an integer, got 'two'"),
    "layers a fraction": ("gpt2", {"n_layer": 2.5}, "n_layer must be an integer, got 2.5"),
    "layers a boolean": ("gpt2", {"n_layer": True}, "n_layer must be an integer, got True"),
    "layers negative": ("gpt2", {"n_layer": -1}, "n_layer must be an integer >= 1, got -1"),
    "no layers": ("gpt2", {"n_layer": 0}, "n_layer must be an integer >= 1, got 0"),
    "no heads": ("gpt2", {"n_head": 0}, "n_head must be an integer >= 1, got 0"),
    "no heads (NeoX)": ("neox", {"num_attention_heads": 0}, "num_attention_heads must be an integer >= 1"),
    "no key-value heads": ("llama", {"num_key_value_heads": 0}, "num_key_value_heads must be an integer >= 1"),
    "key-value heads not dividing": ("llama", {"num_key_value_heads": 3}, "its 3 key-value heads do not divide its 4"),
    "4096 heads": ("gpt2", {"n_head": 4096}, "n_head = 4096 is above the limit of 256"),
    "100000 layers": ("gpt2", {"n_layer": 100_000}, "n_layer = 100000 is above the limit of 256"),
    "width not divisible": ("gpt2", {"n_embd": 30}, "its hidden size 30 is not divisible by its 4 attention heads"),
    "width not divisible (Llama, head_dim given)": (
        "llama",
        {"hidden_size": 66},
        "its hidden size 66 is not divisible",
    ),
    "too wide": ("neox", {"hidden_size": 1 << 15}, "hidden_size = 32768 is above the limit of 16,384"),
    "vocabulary": ("gpt2", {"vocab_size": 10**7}, "vocab_size = 10000000 is above the limit"),
    "context": ("llama", {"max_position_embeddings": 10**9}, "max_position_embeddings = 1000000000 is above"),
    "parameters": ("gpt2", {"n_embd": 16384, "n_head": 128}, "the model would have 6,445,006,848 parameters, above"),
    "two layer counts": ("gpt2", {"num_hidden_layers": 3}, "gives num_hidden_layers twice, differently"),
    "quantized": ("llama", {"quantization_config": {"quant_method": "bitsandbytes"}}, "asks for quantized weights"),
    "code of its own": ("gpt2", {"auto_map": {"AutoModelForCausalLM": "evil.Model"}}, "names code of its own"),
    "asks for its code": ("gpt2", {"trust_remote_code": True}, "asks for its own code to run"),
    "unknown model type": ("gpt2", {"model_type": "evil"}, "model_type 'evil' is not one transformers"),
    "architectures a string": (  # read by its first letter, "G", it named no architecture
        "gpt2",
        {"architectures": "GPT2LMHeadModel"},
        "architectures must be a list of class names, such as .*: got 'GPT2LMHeadModel'",
    ),
    "architectures not names": ("llama", {"architectures": [7]}, "architectures must be a list of .*: got \\[7\\]"),
}


@pytest.mark.parametrize("case", CONFIGS)
def test_configs_beyond_the_limits_or_asking_for_code_or_quantization_are_refused(models, tmp_path, capsys, case):
    architecture, changes, match = CONFIGS[case]
    folder = copy_model(models, architecture, tmp_path / "model", **changes)
    (folder / "evil.py").write_text("raise SystemExit('code from the folder ran')\n")
    assert_refused(capsys, tmp_path, folder, "config.json: " + match)


def test_a_model_built_in_python_with_architectures_a_string_boots_as_its_own_class(models):
    model, _ = load_pretrained(find_source(str(models["gpt2"])))
    model.config.architectures = "GPT2LMHeadModel"  # a config built in Python, not read from a folder's file
    assert lm.as_hooked(model).cfg.n_layers == 2


@pytest.mark.parametrize("number", ["NaN", "Infinity", "1e999"])  # 1e999: Python's json reads it as infinity
def test_a_config_holding_nan_or_infinity_is_refused(models, tmp_path, capsys, number):
    folder = copy_model(models, "gpt2", tmp_path / "model")
    text = (folder / "config.json").read_text()
    (folder / "config.json").write_text(text.replace('"layer_norm_epsilon": 1e-05', f'"layer_norm_epsilon": {number}'))
    assert number in (folder / "config.json").read_text()
    assert_refused(capsys, tmp_path, folder, f"config.json: not strict JSON \\({number}\\)")


def test_a_tokenizer_config_naming_code_of_its_own_is_refused(models, tmp_path, capsys):
    folder = copy_model(models, "llama", tmp_path / "model")
    edit_json(folder / "tokenizer_config.json", {"auto_map": {"AutoTokenizer": ["evil.Tokenizer", None]}})
    assert_refused(capsys, tmp_path, folder, "tokenizer_config.json: names code of its own")


def test_a_tokenizer_whose_unknown_word_token_is_not_in_its_vocabulary_is_refused_naming_the_file(
    models, tmp_path, capsys
):
    folder = copy_model(models, "llama", tmp_path / "model")
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["model"]["unk_token"] = "<nope>"  # the tokenizers library loads it, then fails on a word it lacks
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    assert_refused(
        capsys,
        tmp_path,
        folder,
        f"^{re.escape(str(folder))}: tokenizer.json: its model's unk_token '<nope>' is not in its vocabulary",
    )


def test_a_tokenizer_config_without_a_tokenizer_file_is_refused_in_one_whole_line(models, tmp_path, capsys):
    folder = copy_model(models, "llama", tmp_path / "model")
    (folder / "tokenizer.json").unlink()
    assert_refused(
        capsys,
        tmp_path,
        folder,
        f"^{re.escape(str(folder))} has tokenizer_config.json but no tokenizer file "
        r"\(tokenizer.json, vocab.json, vocab.txt, tokenizer.model\) to build its tokenizer from: "
        "add one, or remove tokenizer_config.json$",
    )


def test_a_tokenizer_needing_no_vocabulary_still_loads_from_its_config_alone(models, tmp_path):
    folder = copy_model(models, "gpt2", tmp_path / "model")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "ByT5Tokenizer"}))  # bytes
    _, tokenizer = load_pretrained(find_source(str(folder)))
    assert type(tokenizer).__name__ == "ByT5Tokenizer"


# --- the weights: exactly the config's tensors, finite --------------------------------------------------


def with_weights(models, folder, edit):
    copy_model(models, "gpt2", folder)
    tensors = load_file(folder / "model.safetensors")
    edit(tensors)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def test_weights_with_a_tensor_the_config_has_no_place_for_are_refused_by_name(models, tmp_path, capsys):
    folder = with_weights(models, tmp_path / "model", lambda t: t.update({"transformer.h.0.attn.extra": torch.ones(3)}))
    assert_refused(
        capsys, tmp_path, folder, r"1 tensor\(s\) its config has no place for \(e.g. transformer.h.0.attn.extra\)"
    )


def test_a_tensor_of_another_shape_is_refused_naming_it_and_both_shapes(models, tmp_path, capsys):
    folder = with_weights(
        models, tmp_path / "model", lambda t: t.update({"transformer.h.0.ln_1.weight": torch.ones(33)})
    )
    assert_refused(capsys, tmp_path, folder, r"tensor transformer.h.0.ln_1.weight is \[33\] in its weights but \[32\]")


def test_gpt2s_saved_causal_masks_and_tied_embeddings_still_load(models, tmp_path):
    def add_masks(tensors):
        for layer in range(2):
            tensors[f"transformer.h.{layer}.attn.bias"] = torch.tril(torch.ones(64, 64)).view(1, 1, 64, 64)
            tensors[f"transformer.h.{layer}.attn.masked_bias"] = torch.tensor(-1e4)

    model, _ = load_pretrained(find_source(str(with_weights(models, tmp_path / "model", add_masks))))
    assert model.lm_head.weight is model.transformer.wte.weight  # tied: saved once, loaded into both


def test_integer_weights_load_cast_to_float32_with_a_one_line_warning(models, tmp_path, capsys):
    def quantize(tensors):
        name = "transformer.h.0.mlp.c_fc.weight"
        tensors[name] = (tensors[name] * 100).to(torch.int8)  # as if quantized, its scales left out
        tensors["transformer.h.0.attn.bias"] = torch.ones(1, 1, 64, 64, dtype=torch.bool)  # a saved mask: not a weight

    folder = with_weights(models, tmp_path / "model", quantize)
    stored = load_file(folder / "model.safetensors")["transformer.h.0.mlp.c_fc.weight"]
    message = r"1 weight tensor\(s\) stored as int8 \(e.g. transformer.h.0.mlp.c_fc.weight\) were cast to float32"
    with pytest.warns(CastWeightsWarning, match=message) as caught:
        model, _ = load_pretrained(find_source(str(folder)))
    assert torch.equal(model.transformer.h[0].mlp.c_fc.weight, stored.float())  # loaded, as float32
    (warning,) = [w for w in caught if w.category is CastWeightsWarning]
    shown = warnings.formatwarning(warning.message, warning.category, warning.filename, warning.lineno)
    assert len(shown.strip().splitlines()) == 1 and warning.filename == str(folder / "model.safetensors"), shown
    code, out, err = cli(capsys, "info", str(folder))  # reads the headers, loads nothing: says what is stored
    assert code == 0 and "(float32, int8)" in out, err
    with warnings.catch_warnings():
        warnings.simplefilter("error", CastWeightsWarning)
        load_pretrained(find_source(str(models["gpt2"])))  # float weights: no warning


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_weights_holding_nan_or_infinity_are_refused_naming_the_tensor(models, tmp_path, capsys, value):
    def poison(tensors):
        tensors["transformer.h.1.mlp.c_fc.weight"][3, 5] = value

    folder = with_weights(models, tmp_path / "model", poison)
    assert_refused(capsys, tmp_path, folder, "tensor transformer.h.1.mlp.c_fc.weight holds NaN or infinity")


# --- whatever the libraries raise on a stranger's files: one line --------------------------------------


@pytest.mark.parametrize(
    "file, changes, raised",
    [
        ("tokenizer.json", None, "KeyError"),
        ("tokenizer_config.json", {"added_tokens_decoder": 5}, "AttributeError"),
        ("config.json", {"rope_parameters": {"rope_type": "yarn", "factor": "big"}}, "TypeError"),
    ],
)
def test_what_the_libraries_raise_on_broken_files_becomes_one_line(models, tmp_path, capsys, file, changes, raised):
    folder = copy_model(models, "llama", tmp_path / "model")
    if changes is None:
        (folder / file).write_text('{"version": "1.0"}')
    else:
        edit_json(folder / file, changes)
    assert_refused(capsys, tmp_path, folder, f"{folder}: .*{raised}: ")


# --- the local Hugging Face cache: links into blobs/ of the model's own cache folder ----------------------


def cache_model(models, cache, architecture="gpt2", commit="a" * 40):
    """``local/tiny`` laid out as huggingface_hub writes it: refs/main, and snapshots/<commit>/ of links into blobs/."""
    repo = cache / "models--local--tiny"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "blobs").mkdir()
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for path in models[architecture].iterdir():
        shutil.copy(path, repo / "blobs" / path.name)
        (snapshot / path.name).symlink_to(f"../../blobs/{path.name}")
    return snapshot


@pytest.fixture
def cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


def test_a_cache_model_is_read_through_its_snapshot_links(models, cache):
    cache_model(models, cache)
    model, _ = load_pretrained(find_source("local/tiny"))
    assert model.config.n_layer == 2


@pytest.mark.parametrize("kind", ["outside", "named pipe", "index outside"])
def test_a_cache_snapshot_leading_outside_its_cache_folder_or_to_a_pipe_is_refused(
    models, cache, tmp_path, capsys, kind
):
    snapshot = cache_model(models, cache)
    blob = cache / "models--local--tiny" / "blobs"
    if kind == "outside":
        (snapshot / "config.json").unlink()
        (snapshot / "config.json").symlink_to(models["gpt2"] / "config.json")
        match = "leads outside the cache's folder of local/tiny"
    elif kind == "named pipe":  # not a file to huggingface_hub's lookup: absent, never opened
        (blob / "model.safetensors").unlink()
        os.mkfifo(blob / "model.safetensors")
        match = "has no safetensors weights"
    else:
        rest = sharded(models, tmp_path / "sharded", "../../../../elsewhere.safetensors")
        save_file(rest, tmp_path / "elsewhere.safetensors", metadata={"format": "pt"})
        (snapshot / "model.safetensors").unlink()
        for file in ("model-00001-of-00002.safetensors", INDEX):
            shutil.copy(tmp_path / "sharded" / file, blob / file)
            (snapshot / file).symlink_to(f"../../blobs/{file}")
        match = "only safetensors files in the model's folder itself"
    assert_refused(capsys, tmp_path, "local/tiny", match)


@pytest.mark.parametrize("kind", ["named pipe", "link", "huge"])
def test_a_cache_ref_that_is_no_small_regular_file_is_refused_not_waited_on(models, cache, tmp_path, capsys, kind):
    # issue 52 (item 2): huggingface_hub's scan of the cache opened a pipe at refs/main and waited for ever
    cache_model(models, cache)
    ref = cache / "models--local--tiny" / "refs" / "main"
    ref.unlink()
    if kind == "named pipe":
        os.mkfifo(ref)
    elif kind == "link":
        (tmp_path / "elsewhere").write_text("a" * 40)
        ref.symlink_to(tmp_path / "elsewhere")
    else:
        ref.write_text("a" * 100_000)
    assert_refused(capsys, tmp_path, "local/tiny", "the cache's ref .*refs/main of local/tiny cannot be read")


def test_two_cache_revisions_for_one_step_are_refused(models, cache):
    """step1000 and step_1000 would both be step 1000: one checkpoint's result would silently replace the other's."""
    cache_model(models, cache)
    refs = cache / "models--local--tiny" / "refs"
    for name in ("step1000", "step_1000"):
        (refs / name).write_text("a" * 40)
    with pytest.raises(LanguageModelError, match="two revisions for one step"):
        find_source("local/tiny")
