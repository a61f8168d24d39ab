"""The product record the shop spider yields (a dataclass: itemadapter sends it as a JSON object)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Product:
    sku: str
    name: str | None
    price: float | None
    currency: str | None
    available: bool | None
    url: str

    REQUIRED = ("sku", "name", "price", "currency")
