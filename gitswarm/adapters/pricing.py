"""Token prices for CLIs that report tokens but no dollar cost (codex): a table the user can edit.

The shipped table is `adapters/prices.toml`; a repository's
`.gitswarm/prices.toml` overrides it model by model. Prices are USD per
million tokens.
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
