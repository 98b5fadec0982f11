"""The package's face: the names a notebook needs, from ``induction_probes`` itself, without loading torch
until one is used."""

import subprocess
import sys

import induction_probes


def test_every_exported_name_is_the_object_its_module_defines():
    import importlib

    for name, module in induction_probes.EXPORTS.items():
        assert getattr(induction_probes, name) is getattr(importlib.import_module(module), name), name
    assert set(induction_probes.__all__) == set(induction_probes.EXPORTS) <= set(dir(induction_probes))


def test_importing_the_package_loads_no_torch_and_an_unknown_name_is_an_attribute_error():
    code = (
        "import sys, induction_probes\n"
        "assert 'torch' not in sys.modules and 'matplotlib' not in sys.modules\n"
        "try:\n    induction_probes.frobnicate\nexcept AttributeError as error:\n    print(error)\n"
        "run = induction_probes.Run.open('markov-k3')\n"
        "assert 'torch' in sys.modules\nprint(run.path.name)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["module 'induction_probes' has no attribute 'frobnicate'", "markov-k3"]
