"""A small online store's back office: the tools a support agent is given.

The worked example of a stateful tool environment (``environment: module: retail_env.py`` in
``retail_support.eval.yaml``), after tau-bench's retail domain but written for this repository.
Every public function whose first parameter is ``state`` is a tool: ``state`` is the store as a
JSON document (users, products with their variants, orders, transfers to people), read from the
item's state file before the call and written back after it. The other parameters are what the
model fills in; the docstring is the tool's description.

Written to be read as documentation:

- deterministic: no clock, no randomness; an id a tool makes is derived from the state (the
  next transfer is ``HT-`` and one more than the transfers so far);
- the store's policy lives in the tools where it can: a tool that is asked for something the
  policy forbids raises ``ValueError`` with a message the model reads (``error: ...``) and
  leaves the state as it was (every check runs before the first change);
- standard library only: the module runs in the item's sandbox, not in the pytest process.
"""

import copy
from typing import Any, Literal, get_args

#: Why a pending order may be cancelled (the policy's two reasons): a Literal is offered to the
#: model as the JSON schema's enum; the tool still checks, as a model may send anything.
CancelReason = Literal["no longer needed", "ordered by mistake"]
CANCEL_REASONS: tuple[str, ...] = get_args(CancelReason)
#: What a transfer to a person may be about.
TransferTopic = Literal["damaged item", "billing dispute", "other"]
TRANSFER_TOPICS: tuple[str, ...] = get_args(TransferTopic)


# -- lookups: they read the state and never change it ---------------------------------------


def find_user_id_by_email(state: dict[str, Any], email: str) -> str:
    """Find a customer's user id from their email address (the first step of every request)."""
    wanted = email.strip().lower()
    for user_id, user in sorted(state["users"].items()):
        if user["email"].lower() == wanted:
            return str(user_id)
    raise ValueError(f"no user with email {email}")


def find_user_id_by_name_zip(
    state: dict[str, Any], first_name: str, last_name: str, zip_code: str
) -> str:
    """Find a customer's user id from their first name, last name and zip code (when they do
    not remember their email)."""
    for user_id, user in sorted(state["users"].items()):
        name, address = user["name"], user["address"]
        if (
            name["first"].lower() == first_name.strip().lower()
            and name["last"].lower() == last_name.strip().lower()
            and address["zip"] == zip_code.strip()
        ):
            return str(user_id)
    raise ValueError(f"no user named {first_name} {last_name} with zip code {zip_code}")


def get_user_details(state: dict[str, Any], user_id: str) -> dict[str, Any]:
    """A customer's name, email, address, payment methods and order ids."""
    return copy.deepcopy(_user(state, user_id))


def get_order_details(state: dict[str, Any], order_id: str) -> dict[str, Any]:
    """An order's status, items (item ids, names, options, prices), shipping address and
    payments. Order ids look like W1001."""
    return {"order_id": order_id, **copy.deepcopy(_order(state, order_id))}


def list_products(state: dict[str, Any]) -> dict[str, str]:
    """Every product's name and its product id."""
    return {
        product["name"]: product_id for product_id, product in sorted(state["products"].items())
    }


def get_product_details(state: dict[str, Any], product_id: str) -> dict[str, Any]:
    """A product's variants: each item id with its options (color, size), price and whether it
    is available."""
    product = state["products"].get(product_id)
    if product is None:
        raise ValueError(f"product {product_id} not found")
    return {"product_id": product_id, **copy.deepcopy(product)}


# -- pending orders: cancel, or change where they go ----------------------------------------


def cancel_pending_order(state: dict[str, Any], order_id: str, reason: CancelReason) -> str:
    """Cancel a pending order and refund it to the payment method that paid for it. reason:
    'no longer needed' or 'ordered by mistake'."""
    order = _order(state, order_id)
    _require_status(order_id, order, "pending", "cancelled")
    if reason not in CANCEL_REASONS:
        raise ValueError(f"reason must be one of {', '.join(map(repr, CANCEL_REASONS))}")
    payment = order["payment_history"][0]
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    _refund(state, order, payment["payment_method_id"], payment["amount"])
    return f"order {order_id} cancelled; {payment['amount']:.2f} refunded to {payment['payment_method_id']}"


def modify_pending_order_address(
    state: dict[str, Any], order_id: str, street: str, city: str, zip_code: str
) -> str:
    """Change the shipping address of a pending order (street, city and zip code)."""
    order = _order(state, order_id)
    _require_status(order_id, order, "pending", "changed")
    order["address"] = {"street": street.strip(), "city": city.strip(), "zip": zip_code.strip()}
    return f"order {order_id} will be shipped to {street}, {zip_code} {city}"


# -- delivered orders: return or exchange items ---------------------------------------------


def return_delivered_order_items(
    state: dict[str, Any], order_id: str, item_ids: list[str], payment_method_id: str
) -> str:
    """Return items of a delivered order. The refund goes to payment_method_id: the method that
    paid for the order, or a gift card of the same customer. One return or exchange per order."""
    order = _order(state, order_id)
    _require_status(order_id, order, "delivered", "returned")
    items = _order_items(order_id, order, item_ids)
    paid_with = order["payment_history"][0]["payment_method_id"]
    method = _payment_method(state, order["user_id"], payment_method_id)
    if payment_method_id != paid_with and method["kind"] != "gift_card":
        raise ValueError("a refund goes to the original payment method or a gift card")
    order["status"] = "return requested"
    order["return"] = {
        "item_ids": sorted(item_ids),
        "payment_method_id": payment_method_id,
        "amount": _total(items),
    }
    return (
        f"return of {len(items)} item(s) from {order_id} requested; {_total(items):.2f} to refund"
    )


def exchange_delivered_order_items(
    state: dict[str, Any],
    order_id: str,
    item_ids: list[str],
    new_item_ids: list[str],
    payment_method_id: str,
) -> str:
    """Exchange items of a delivered order for other variants of the same products (item ids
    from get_product_details, in the same order as item_ids). The price difference is paid with,
    or refunded to, payment_method_id. One return or exchange per order."""
    order = _order(state, order_id)
    _require_status(order_id, order, "delivered", "exchanged")
    items = _order_items(order_id, order, item_ids)
    if len(new_item_ids) != len(items):
        raise ValueError("give one new item id for each item to exchange")
    new_prices = [
        _new_variant_price(state, item, new) for item, new in zip(items, new_item_ids, strict=True)
    ]
    difference = round(sum(new_prices) - _total(items), 2)
    method = _payment_method(state, order["user_id"], payment_method_id)
    if method["kind"] == "gift_card" and method["balance"] < difference:
        raise ValueError(f"gift card {payment_method_id} does not cover {difference:.2f}")
    order["status"] = "exchange requested"
    pairs = sorted(zip(item_ids, new_item_ids, strict=True))  # the same exchange in any order
    order["exchange"] = {
        "item_ids": [old for old, _ in pairs],
        "new_item_ids": [new for _, new in pairs],
        "payment_method_id": payment_method_id,
        "price_difference": difference,
    }
    return f"exchange requested for {order_id}; price difference {difference:.2f}"


# -- people ---------------------------------------------------------------------------------


def transfer_to_human_agents(state: dict[str, Any], user_id: str, topic: TransferTopic) -> str:
    """Hand the customer over to a person, when the request is outside what these tools and the
    policy allow. topic: 'damaged item', 'billing dispute' or 'other'."""
    _user(state, user_id)
    if topic not in TRANSFER_TOPICS:
        raise ValueError(f"topic must be one of {', '.join(map(repr, TRANSFER_TOPICS))}")
    ticket = f"HT-{len(state['transfers']) + 1:03d}"
    state["transfers"].append({"ticket": ticket, "user_id": user_id, "topic": topic})
    return f"transferred: ticket {ticket}; a person will contact the customer"


# -- the policy's checks and the shared steps (private: not tools) --------------------------


def _user(state: dict[str, Any], user_id: str) -> dict[str, Any]:
    user: dict[str, Any] | None = state["users"].get(user_id)
    if user is None:
        raise ValueError(f"user {user_id} not found")
    return user


def _order(state: dict[str, Any], order_id: str) -> dict[str, Any]:
    order: dict[str, Any] | None = state["orders"].get(order_id)
    if order is None:
        raise ValueError(f"order {order_id} not found")
    return order


def _require_status(order_id: str, order: dict[str, Any], status: str, action: str) -> None:
    if order["status"] != status:
        raise ValueError(
            f"order {order_id} is {order['status']}: only a {status} order can be {action}"
        )


def _order_items(order_id: str, order: dict[str, Any], item_ids: list[str]) -> list[dict[str, Any]]:
    """The order's items named by ``item_ids``: each once, each in the order."""
    if not item_ids:
        raise ValueError("name at least one item id")
    if len(set(item_ids)) != len(item_ids):
        raise ValueError("an item id is named twice")
    by_id = {item["item_id"]: item for item in order["items"]}
    missing = [item_id for item_id in item_ids if item_id not in by_id]
    if missing:
        raise ValueError(f"order {order_id} has no item {', '.join(missing)}")
    return [by_id[item_id] for item_id in item_ids]


def _new_variant_price(state: dict[str, Any], item: dict[str, Any], new_item_id: str) -> float:
    """The price of ``new_item_id``, a different, available variant of ``item``'s product."""
    variants = state["products"][item["product_id"]]["variants"]
    variant = variants.get(new_item_id)
    if variant is None:
        raise ValueError(f"{new_item_id} is not a variant of {item['name']}")
    if new_item_id == item["item_id"]:
        raise ValueError(f"{new_item_id} is the item itself")
    if not variant["available"]:
        raise ValueError(f"{new_item_id} is not available")
    return float(variant["price"])


def _payment_method(state: dict[str, Any], user_id: str, payment_method_id: str) -> dict[str, Any]:
    methods = _user(state, user_id)["payment_methods"]
    if payment_method_id not in methods:
        raise ValueError(f"{payment_method_id} is not a payment method of {user_id}")
    method: dict[str, Any] = methods[payment_method_id]
    return method


def _refund(state: dict[str, Any], order: dict[str, Any], method_id: str, amount: float) -> None:
    """Record a refund on ``order``; a gift card's balance goes up at once."""
    order["payment_history"].append(
        {"kind": "refund", "payment_method_id": method_id, "amount": amount}
    )
    method = _user(state, order["user_id"])["payment_methods"][method_id]
    if method["kind"] == "gift_card":
        method["balance"] = round(method["balance"] + amount, 2)


def _total(items: list[dict[str, Any]]) -> float:
    return round(sum(float(item["price"]) for item in items), 2)
