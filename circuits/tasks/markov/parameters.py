"""The names and checks of ICL-MC's parameters, torch-free and on plain arguments: the task config
(:class:`~induction_probes.circuits.tasks.markov.markov_task.MarkovTask`) and the sampler
(:func:`~induction_probes.circuits.tasks.markov.chains.sample_markov`) both check through these, so a sampler
called with plain arguments refuses what the config refuses, with the same message.
"""

from __future__ import annotations

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import require_numbers, require_power
from induction_probes.circuits.tasks.markov.prior_registry import PRIORS, SIMPLE_PRIORS
from induction_probes.circuits.validation import quoted, require_int, require_positive

DEFAULT_MIXTURE = ("doubly-stochastic", "unigram")


def check_chains(k: int, seq_len: int, n: int, alpha: float) -> None:
    """k states, sequences of seq_len tokens, chains of order n − 1, Dirichlet(α) rows: each in range, and
    small enough that one sequence's n-gram counts, lifted chain and attention pattern fit the limits."""
    require_int("k", k, 2)
    require_int("seq_len", seq_len, 2)
    require_int("n", n, 1)
    require_positive("alpha", alpha)
    if n > seq_len:
        raise BadInput(f"n must be <= seq_len: an n-gram needs n tokens, got n={n}, seq_len={seq_len}")


def check_sizes(k: int, seq_len: int, n: int) -> None:
    # one sequence's n-gram counts, its chain lifted to (n-1)-tuples, one attention pattern over it
    require_power("the n-gram counts of one sequence (k^n per position)", k, n, factor=seq_len)
    require_power("the lifted transition matrix of one chain (k^(2(n-1)))", k, 2 * (n - 1))
    require_numbers("one attention pattern (seq_len^2)", seq_len**2)


def numbers_per_sequence(k: int, seq_len: int, n: int) -> int:
    """About how many numbers one sequence costs in sampling, evaluating and probing it."""
    return seq_len * k**n + k ** (2 * (n - 1)) + seq_len**2


def components(prior: str, mixture: tuple[str, str] | None) -> tuple[str, ...]:
    """The priors a mixture mixes, first one first; empty for other priors."""
    if prior not in PRIORS or not PRIORS.info(prior).get("mixes"):
        return ()
    return mixture if mixture is not None else DEFAULT_MIXTURE


def check_prior(
    k: int, n: int, prior: str, p: float | None, mixture: tuple[str, str] | None = None, eval_prior: str | None = None
) -> None:
    """The prior of the training chains (with its p and a mixture's two priors) and of the evaluation ones, by
    what each prior's registration says of it (:mod:`~induction_probes.circuits.tasks.markov.prior_registry`)."""
    if prior not in PRIORS:
        raise BadInput(f"prior must be one of {', '.join(PRIORS)}; got {quoted(prior)}")
    if eval_prior is not None and eval_prior not in SIMPLE_PRIORS:
        raise BadInput(f"eval_prior must be one of {', '.join(SIMPLE_PRIORS)}; got {quoted(eval_prior)}")
    info = PRIORS.info(prior)
    needs_p = bool(info.get("needs_p"))
    if needs_p != (p is not None):
        with_p = PRIORS.names(needs_p=True)
        listed = " and ".join([", ".join(with_p[:-1]), with_p[-1]] if len(with_p) > 1 else with_p)
        raise BadInput(f"p is for the {listed} priors only (and required by them); prior is {prior}")
    if needs_p and not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
        raise BadInput(f"p must be a number in [0, 1], got {quoted(p)}")
    if mixture is not None and not info.get("mixes"):
        raise BadInput("mixture names the components of --prior mixture only")
    mixed = components(prior, mixture)
    if info.get("mixes") and (len(set(mixed)) != 2 or not all(name in SIMPLE_PRIORS for name in mixed)):
        raise BadInput(f"a mixture mixes two different priors of {', '.join(SIMPLE_PRIORS)}; got {quoted(mixture)}")
    bigram_only = [name for name in (prior, *mixed) if PRIORS.info(name).get("bigram_only")]
    if bigram_only and n != 2:
        raise BadInput(f"the {bigram_only[0]} prior is for bigram chains: n must be 2")
    states = info.get("states")
    if states is not None and k != states:
        raise BadInput(f"the {prior} prior is a family of {states}-state chains: k must be {states}")


CURRICULUM_FORM = "PRIOR:SEQUENCES (e.g. doubly-stochastic:64000)"


def parse_curriculum(curriculum: str | None) -> tuple[str, int] | None:
    """``"doubly-stochastic:64000"`` → ``("doubly-stochastic", 64000)``: the first 64,000 training sequences
    from that prior, the rest from the task's; None for no schedule."""
    if curriculum is None:
        return None
    if not isinstance(curriculum, str) or curriculum.count(":") != 1:
        raise BadInput(f"curriculum must be {CURRICULUM_FORM}, got {quoted(curriculum)}")
    prior, count = (part.strip() for part in curriculum.split(":"))
    if prior not in SIMPLE_PRIORS:
        raise BadInput(f"the curriculum's prior must be one of {', '.join(SIMPLE_PRIORS)}; got {quoted(prior)}")
    if not (count.isascii() and count.isdigit()) or int(count) < 1:
        raise BadInput(
            f"the curriculum's sequences must be an integer >= 1, as in {CURRICULUM_FORM}; got {quoted(count)}"
        )
    return prior, int(count)


def check_curriculum(n: int, prior: str, curriculum: str | None) -> None:
    """A schedule whose first prior suits the chains and differs from the training prior (else it is none)."""
    schedule = parse_curriculum(curriculum)
    if schedule is None:
        return
    first, _ = schedule
    if first == prior:
        raise BadInput(f"the curriculum's prior must differ from the training prior ({prior}): it would change nothing")
    if PRIORS.info(first).get("bigram_only") and n != 2:
        raise BadInput(f"the {first} prior is for bigram chains: n must be 2")
