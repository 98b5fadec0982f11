"""Every-head ablation with heads as the outer loop: the heads of one layer stacked along the batch give the losses of
one head at a time and of a hand-written hook loop; a journal keeps each finished head, and an interrupted ablation,
rerun, gives the table of an uninterrupted one; a journal of other settings, of another model or of no ablation is
refused in one line."""

import json
import os

import pytest
import torch
from lm_models import save_model

from induction_probes import lm
from induction_probes.probes.lm import ablate_heads
from induction_probes.probes.lm.ablation_journal import AblationJournal
from induction_probes.probes.lm.losses import per_token_loss
from induction_probes.probes.lm.protocols import induction_loss


@pytest.fixture(scope="module")
def bridges(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    return {name: lm.as_hooked(str(save_model(name, root / name))) for name in ("gpt2", "neox", "llama")}


def repeated_pair(bridge):
    repeated = lm.repeated_random_tokens(bridge, length=(5, 12), batch=6, seed=2)
    return repeated, lm.repeated_random_tokens(bridge, repeated.length_range, 6, seed=3)


def per_sequence(result) -> torch.Tensor:
    loss = result.loss
    return torch.stack([loss.first_half_per_sequence, loss.repeated_half_per_sequence, loss.icl_per_sequence])


@pytest.mark.parametrize("architecture", ["gpt2", "neox", "llama"])
@pytest.mark.parametrize("mode", ["zero", "mean", "resample"])
def test_heads_stacked_in_one_pass_give_the_losses_of_one_head_at_a_time(bridges, architecture, mode, monkeypatch):
    bridge = bridges[architecture]
    repeated, reference = repeated_pair(bridge)
    head_sets = [*lm.single_heads(bridge), [(1, 1), (0, 3)]]
    _, stacked = lm.ablate(bridge, repeated, head_sets, mode, reference, seed=7)
    assert ablate_heads.PASS_TOKENS >= 2 * repeated.tokens.numel()  # so the first call stacks heads
    # one sequence a pass: every variant alone, and every chunk of one sequence
    monkeypatch.setattr(ablate_heads, "PASS_TOKENS", 1)
    _, alone = lm.ablate(bridge, repeated, head_sets, mode, reference, seed=7)
    for ours, theirs in zip(stacked, alone):
        assert ours.heads == theirs.heads
        # the same float32 operations in batches of other sizes: equal to rounding (1e-5 nats of ~4)
        assert torch.allclose(per_sequence(ours), per_sequence(theirs), atol=1e-5)


@pytest.mark.parametrize("architecture", ["gpt2", "neox", "llama"])
def test_zero_ablation_equals_a_hand_written_hook_loop(bridges, architecture):
    bridge = bridges[architecture]
    repeated, _ = repeated_pair(bridge)
    baseline, results = lm.ablate(bridge, repeated, lm.single_heads(bridge))
    for result in results:
        (layer, head), *_ = result.heads

        def zero(z, hook, head=head):
            z = z.clone()
            z[:, :, head] = 0
            return z

        with torch.no_grad():
            logits = bridge.run_with_hooks(repeated.tokens, fwd_hooks=[(f"blocks.{layer}.attn.hook_z", zero)])
        expected = induction_loss(per_token_loss(logits, repeated.tokens), repeated)
        assert torch.allclose(result.loss.repeated_half_per_sequence, expected.repeated_half_per_sequence, atol=1e-5)
        assert torch.allclose(result.loss.first_half_per_sequence, expected.first_half_per_sequence, atol=1e-5)


class Interrupted(Exception):
    pass


def test_an_interrupted_ablation_rerun_gives_the_uninterrupted_table(bridges, tmp_path, monkeypatch):
    bridge = bridges["neox"]
    repeated, reference = repeated_pair(bridge)
    heads = lm.single_heads(bridge)
    _, whole = lm.ablate(bridge, repeated, heads, "resample", reference, seed=5)
    journal = tmp_path / "ablation.jsonl"
    record, written = AblationJournal.record, []

    def record_then_stop(self, key, loss):  # Ctrl-C after the clean losses and two heads are on disk
        record(self, key, loss)
        written.append(key)
        if len(written) == 3:
            raise Interrupted

    monkeypatch.setattr(AblationJournal, "record", record_then_stop)
    with pytest.raises(Interrupted):
        lm.ablate(bridge, repeated, heads, "resample", reference, seed=5, journal=journal)
    monkeypatch.setattr(AblationJournal, "record", record)
    lines = journal.read_bytes().splitlines(keepends=True)
    assert len(lines) == 4  # the header, the clean losses and two heads: readable while the ablation runs
    assert [json.loads(line)["heads"] for line in lines[2:]] == [[list(h) for h in k] for k in written[1:]]
    with journal.open("ab") as handle:  # a kill in the middle of a write leaves half a line
        handle.write(lines[3][: len(lines[3]) // 2])

    ran = []
    monkeypatch.setattr(ablate_heads, "induction_loss", lambda *a: ran.append(1) or induction_loss(*a))
    baseline, resumed = lm.ablate(bridge, repeated, heads, "resample", reference, seed=5, journal=journal)
    assert len(ran) == 1 + len(heads) - 2  # the clean pass, and only the heads the journal lacked
    assert [r.heads for r in resumed] == [r.heads for r in whole]
    for ours, theirs in zip(resumed, whole):
        assert torch.allclose(per_sequence(ours), per_sequence(theirs), atol=1e-5)
    assert len(journal.read_text().splitlines()) == 2 + len(heads)  # the half line is gone, each head once
    assert all(line.endswith("}") for line in journal.read_text().splitlines())


def test_a_journal_of_other_settings_another_model_or_no_ablation_is_refused(bridges, tmp_path):
    gpt2, llama = bridges["gpt2"], bridges["llama"]
    repeated, reference = repeated_pair(gpt2)
    journal = tmp_path / "ablation.jsonl"
    lm.ablate(gpt2, repeated, [[(0, 0)]], journal=journal)
    before = journal.read_bytes()
    with pytest.raises(ValueError, match="differs in its mode, reference sequences"):
        lm.ablate(gpt2, repeated, [[(0, 0)]], "mean", reference, journal=journal)
    with pytest.raises(ValueError, match="differs in its seed:"):
        lm.ablate(gpt2, repeated, [[(0, 0)]], seed=1, journal=journal)
    with pytest.raises(ValueError, match="differs in its sequences"):
        lm.ablate(gpt2, reference, [[(0, 0)]], journal=journal)
    llama_tokens = lm.repeated_random_tokens(llama, length=(5, 12), batch=6, seed=2)
    foreign = tmp_path / "llama.jsonl"
    lm.ablate(llama, llama_tokens, [[(0, 0)]], journal=foreign)
    os.replace(foreign, tmp_path / "moved.jsonl")
    text = (tmp_path / "moved.jsonl").read_text()
    _, clean, _ = text.splitlines()
    (tmp_path / "moved.jsonl").write_text("\n".join([json.dumps(json.loads(before.splitlines()[0])), clean]) + "\n")
    with pytest.raises(ValueError, match="another model"):
        lm.ablate(gpt2, repeated, [[(0, 0)]], journal=tmp_path / "moved.jsonl")
    assert journal.read_bytes() == before  # nothing written by a refused call
    stranger = tmp_path / "notes.txt"
    stranger.write_text('{"a": 1}\n')
    with pytest.raises(ValueError, match="not an ablation journal"):
        lm.ablate(gpt2, repeated, [[(0, 0)]], journal=stranger)
    assert stranger.read_text() == '{"a": 1}\n'
    unfinished = tmp_path / "draft.txt"  # no newline at its end: nothing of it may be cut
    unfinished.write_text("my notes")
    with pytest.raises(ValueError, match="not an ablation journal"):
        lm.ablate(gpt2, repeated, [[(0, 0)]], journal=unfinished)
    assert unfinished.read_text() == "my notes"
    os.link(journal, tmp_path / "second-name.jsonl")
    with pytest.raises(ValueError, match="hard link"):
        lm.ablate(gpt2, repeated, [[(0, 0)]], journal=journal)
    (tmp_path / "link.jsonl").symlink_to(stranger)
    with pytest.raises(ValueError, match="symbolic link"):
        lm.ablate(gpt2, repeated, [[(0, 0)]], journal=tmp_path / "link.jsonl")


def test_the_command_line_journals_resumes_and_refuses_another_ablations_journal(tmp_path, capsys):
    from induction_probes.cli import main

    folder = save_model("gpt2", tmp_path / "gpt2")
    journal = tmp_path / "heads.jsonl"
    argv = ["ablate", str(folder), "--n-seqs", "4", "--length", "6", "--out", str(journal), "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert len(journal.read_text().splitlines()) == 2 + 8  # header, clean losses, every head of 2 x 4
    assert main(argv) == 0  # everything read back: the same answer
    assert json.loads(capsys.readouterr().out) == first
    assert main([*argv, "--seed", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "differs in its seed, sequences" in err


def test_a_share_of_the_gap_is_given_only_where_the_gaps_interval_lies_above_zero():
    from induction_probes.probes.lm.ablate_heads import HeadAblation
    from induction_probes.probes.lm.protocols import InductionLoss

    def losses(first, repeated):
        first, repeated = torch.tensor(first, dtype=torch.float64), torch.tensor(repeated, dtype=torch.float64)
        return InductionLoss(first, repeated, torch.zeros_like(first))

    ablated = losses([4.0, 4.0, 4.0, 4.0], [4.0, 4.0, 4.0, 4.0])
    unsure = losses([4.03, 3.99, 4.01, 4.01], [4.0, 4.0, 4.0, 4.0])  # gap 0.01, t interval [-0.019, 0.039]
    sure = losses([5.0, 5.2, 4.9, 5.1], [4.0, 4.0, 4.0, 4.0])  # gap 1.05 [0.85, 1.25]
    assert unsure.gap > 0 and unsure.interval("gap").low < 0 < unsure.interval("gap").high
    assert not unsure.has_gap and sure.has_gap
    assert HeadAblation([(0, 0)], "zero", ablated, unsure).to_json()["gap_removed"] is None
    repeat_as_hard = losses([5.0, 5.2, 4.9, 5.1], [5.0, 5.2, 4.9, 5.1])  # the repeat as hard as the first copy
    assert HeadAblation([(0, 0)], "zero", repeat_as_hard, sure).to_json()["gap_removed"]["value"] == pytest.approx(1.0)
    one = losses([5.0], [4.0])
    assert not one.has_gap  # one sequence: no interval, so no share either
    assert "gap_removed" not in {
        r["measure"] for r in HeadAblation([(0, 0)], "zero", losses([4.0], [4.0]), one).to_records()
    }
