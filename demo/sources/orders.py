"""orders-service (Python): a pricing module whose bugs really run and raise."""

from __future__ import annotations

from demo.sources.commit import CommitSpec

_ORDERS_REPOSITORY = '''"""In-memory order storage (the real service talks to PostgreSQL)."""

from dataclasses import dataclass, field
from decimal import Decimal


@dataclass
class Order:
    order_id: str
    items: list[dict[str, object]] = field(default_factory=list)
    total: Decimal = Decimal(0)


_ORDERS: dict[str, Order] = {}


def save_order(order: Order) -> None:
    _ORDERS[order.order_id] = order


def find_order(order_id: str) -> Order | None:
    return _ORDERS.get(order_id)
'''

_ORDERS_PRICING_V1 = '''"""Prices an order: line totals, coupons and the average item price on receipts."""

from decimal import Decimal

DISCOUNTS = {"WELCOME10": Decimal("0.10"), "SPRING15": Decimal("0.15")}


def line_total(item):
    return Decimal(str(item["unit_price"])) * int(item["quantity"])


def apply_coupon(subtotal, coupon):
    if not coupon:
        return subtotal
    rate = DISCOUNTS[coupon.upper()]
    return subtotal * (1 - rate)


def average_item_price(items):
    total = sum(line_total(item) for item in items)
    return total / len(items)
'''

# v2 adds a coupon and fixes the empty-order division; the coupon lookup moves down by a few lines.
_ORDERS_PRICING_V2 = '''"""Prices an order: line totals, coupons and the average item price on receipts."""

from decimal import Decimal

DISCOUNTS = {
    "WELCOME10": Decimal("0.10"),
    "SPRING15": Decimal("0.15"),
    "LOYAL20": Decimal("0.20"),
}


def line_total(item):
    return Decimal(str(item["unit_price"])) * int(item["quantity"])


def apply_coupon(subtotal, coupon):
    if not coupon:
        return subtotal
    rate = DISCOUNTS[coupon.upper()]
    return subtotal * (1 - rate)


def average_item_price(items):
    if not items:
        return Decimal(0)
    total = sum(line_total(item) for item in items)
    return total / len(items)
'''

_ORDERS_API_V1 = '''"""HTTP handlers of the orders service."""

from orders import pricing, repository


class PricingError(Exception):
    """The order could not be priced."""


def create_order(payload):
    items = payload["items"]
    subtotal = sum(pricing.line_total(item) for item in items)
    try:
        total = pricing.apply_coupon(subtotal, payload.get("coupon"))
    except KeyError as exc:
        raise PricingError(f"cannot price order {payload['order_id']}") from exc
    order = repository.Order(payload["order_id"], items, total)
    repository.save_order(order)
    return {"order_id": order.order_id, "total": str(total)}


def receipt(payload):
    items = payload.get("items", [])
    return {"order_id": payload["order_id"], "average": str(pricing.average_item_price(items))}
'''

_ORDERS_API_V2 = _ORDERS_API_V1 + '''

def refund(payload):
    order = repository.find_order(payload["order_id"])
    amount = order.total
    return {"order_id": payload["order_id"], "refunded": str(amount)}
'''

ORDERS_SERVICE: list[CommitSpec] = [
    CommitSpec("Orders service: create orders and print receipts", {
        "README.md": "# orders-service\n\nCreates and prices orders.\n",
        "orders/__init__.py": '"""The orders service."""\n',
        "orders/repository.py": _ORDERS_REPOSITORY,
        "orders/pricing.py": _ORDERS_PRICING_V1,
        "orders/api.py": _ORDERS_API_V1,
    }, deployed=True),
    CommitSpec("Add refunds and the LOYAL20 coupon; guard the average price of empty orders", {
        "orders/pricing.py": _ORDERS_PRICING_V2,
        "orders/api.py": _ORDERS_API_V2,
    }, deployed=True),
]
