"""What a run cost: the CLI's own figure when it is one, else a price from tokens, else unknown.

Token prices are a table the user can edit: the shipped `adapters/prices.toml`,
overridden model by model by the user's `~/.config/gitswarm/prices.toml` and a
repository's `.gitswarm/prices.toml`. Prices are USD per million tokens.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from gitswarm.model.errors import BadInput

PER = 1_000_000


class Price(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    input: float
    output: float
    cached_input: float | None = None


class PriceFile(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    models: dict[str, Price] = {}


class PriceTable:
    def __init__(self, models: dict[str, Price]) -> None:
        self.models = models

    @classmethod
    def load(cls, paths: list[Path]) -> PriceTable:
        """Later files override earlier ones, model by model; missing files are skipped."""
        models: dict[str, Price] = {}
        for path in paths:
            if not path.is_file():
                continue
            try:
                models.update(msgspec.toml.decode(path.read_bytes(), type=PriceFile).models)
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                raise BadInput(f"{path}: {str(exc).replace('Object contains unknown field', 'unknown key')}") from None
        return cls(models)

    def cost(self, model: str | None, input_tokens: int | None, output_tokens: int | None) -> float | None:
        """The dollar cost of a run, or None when the model or the tokens are unknown."""
        if model is None or (input_tokens is None and output_tokens is None):
            return None
        price = self.models.get(model) or self.models.get(model.split("/")[-1])
        if price is None:
            return None
        return ((input_tokens or 0) * price.input + (output_tokens or 0) * price.output) / PER


def run_cost(
    reported: float | None, model: str | None, input_tokens: int | None, output_tokens: int | None, prices: PriceTable
) -> tuple[float | None, bool]:
    """The run's cost in USD (None when unknown) and whether it is an estimate from tokens.

    A reported cost is believed when it is positive, or zero for a run that used
    no tokens. A zero for tokens spent is no price: Hermes reports 0.0 for a
    custom endpoint, aider and omp for a model their price maps lack. Such a
    run, and one that reports no cost, is priced from its tokens when the table
    has its model, and is otherwise unknown: never free, so that a job's
    `max_usd` cannot be passed by runs recorded as costing nothing.
    """
    used = (input_tokens or 0) + (output_tokens or 0)
    counted = input_tokens is not None or output_tokens is not None
    if reported is not None and reported >= 0 and (reported > 0 or (counted and used == 0)):
        return reported, False
    estimate = prices.cost(model, input_tokens, output_tokens)
    return estimate, estimate is not None
