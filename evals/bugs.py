"""Small services with one known bug each, in Python, Node.js and Java, whose traces are produced for real.

A `BugCase` is a repository (files at a first commit, then the commit that introduces the bug), the
command that triggers the bug, and the truth: the file and statement a developer would fix. Some
culprits are the raising frame; some are a caller that passed bad data; some sit under library frames;
in `evals.bugs_elsewhere` the file to fix is not in the trace at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Language = Literal["python", "node", "java"]


@dataclass(frozen=True)
class BugCase:
    """One bug: the code before and after it, how to trigger it, and where it must be fixed."""

    name: str
    language: Language
    files: dict[str, str]
    """The healthy code, path relative to the repository root -> content."""
    bug: dict[str, str]
    """The files the buggy commit changes, with their new content."""
    culprit_path: str
    culprit_snippet: str
    """Text on the line to fix (its first occurrence in `culprit_path`)."""
    kind: Literal["raising-frame", "caller", "under-library", "not-in-trace"]
    argv: tuple[str, ...] = ()
    """Arguments of the program run that triggers the bug (the Java cases read them)."""


_PY_MAIN = "from app.api import handle\n\nhandle({args})\n"
_NODE_MAIN = ("const {{ handle }} = require('./api');\n\ntry {{\n  handle({args});\n}} catch (err) {{\n"
              "  process.stderr.write(err.stack + '\\n');\n  process.exit(1);\n}}\n")
_JAVA_MAIN = """\
package com.acme;

public final class Main {
    public static void main(String[] args) {
        try {
            new com.acme.orders.Api().handle(args.length > 0 ? args[0] : "");
        } catch (RuntimeException e) {
            e.printStackTrace();
            System.exit(1);
        }
    }
}
"""

PY_CASES = (
    BugCase("py-missing-setting", "python", {
        "app/__init__.py": "",
        "app/config.py": 'SETTINGS = {"currency": "EUR", "discount": 0.1}\n',
        "app/pricing.py": "from app.config import SETTINGS\n\n\ndef total(order):\n"
                          '    discount = SETTINGS["discount"]\n    return order["price"] * (1 - discount)\n',
        "app/api.py": "from app.pricing import total\n\n\ndef handle(order):\n"
                      '    return {"total": total(order)}\n',
        "app/__main__.py": _PY_MAIN.format(args='{"price": 10}'),
    }, {"app/config.py": '# discount moved to the promotions service\nSETTINGS = {"currency": "EUR"}\n'},
        "app/pricing.py", 'SETTINGS["discount"]', "raising-frame"),
    BugCase("py-empty-average", "python", {
        "app/__init__.py": "",
        "app/stats.py": "def average(values):\n    if not values:\n        return 0.0\n"
                        "    return sum(values) / len(values)\n",
        "app/api.py": "from app.stats import average\n\n\ndef handle(request):\n"
                      '    prices = [item["price"] for item in request["items"]]\n'
                      '    return {"average": average(prices)}\n',
        "app/__main__.py": _PY_MAIN.format(args='{"items": []}'),
    }, {"app/stats.py": "def average(values):\n    return sum(values) / len(values)\n"},
        "app/stats.py", "sum(values) / len(values)", "raising-frame"),
    BugCase("py-none-user", "python", {
        "app/__init__.py": "",
        "app/users.py": 'USERS = {"u1": {"email": "a@example.com"}}\n\n\ndef find_user(user_id):\n'
                        "    return USERS.get(user_id)\n",
        "app/api.py": "from app.users import find_user\n\n\ndef handle(request):\n"
                      '    user = find_user(request["user"]) or {"email": ""}\n'
                      '    return {"to": user["email"].lower()}\n',
        "app/__main__.py": _PY_MAIN.format(args='{"user": "u9"}'),
    }, {"app/api.py": "from app.users import find_user\n\n\ndef handle(request):\n"
                      '    user = find_user(request["user"])\n    return {"to": user["email"].lower()}\n'},
        "app/api.py", 'user["email"].lower()', "raising-frame"),
    BugCase("py-bad-json", "python", {
        "app/__init__.py": "",
        "app/ingest.py": "import json\n\n\ndef parse(payload):\n    if not payload.strip():\n"
                         "        return {}\n    return json.loads(payload)\n",
        "app/api.py": "from app.ingest import parse\n\n\ndef handle(body):\n    return parse(body)\n",
        "app/__main__.py": _PY_MAIN.format(args="'{\"a\": 1,}'"),
    }, {"app/ingest.py": "import json\n\n\ndef parse(payload):\n    return json.loads(payload)\n"},
        "app/ingest.py", "json.loads(payload)", "under-library"),
    BugCase("py-caller-wrong-arg", "python", {
        "app/__init__.py": "",
        "app/shipping.py": "def weight_kg(parcel):\n    grams = parcel[\"weight_g\"]\n    return grams / 1000\n",
        "app/orders.py": "from app.shipping import weight_kg\n\n\ndef quote(order):\n"
                         '    parcel = order["parcel"]\n    return 4.5 + weight_kg(parcel) * 1.2\n',
        "app/api.py": "from app.orders import quote\n\n\ndef handle(order):\n    return {\"quote\": quote(order)}\n",
        "app/__main__.py": _PY_MAIN.format(args='{"id": "o1", "parcel": {"weight_g": 900}}'),
    }, {"app/orders.py": "from app.shipping import weight_kg\n\n\ndef quote(order):\n"
                         '    parcel = order["id"]\n    return 4.5 + weight_kg(parcel) * 1.2\n'},
        "app/orders.py", 'parcel = order["id"]', "caller"),
)

NODE_CASES = (
    BugCase("node-undefined-items", "node", {
        "src/cart.js": "function count(cart) {\n  const items = cart.items || [];\n  return items.length;\n}\n\n"
                       "module.exports = { count };\n",
        "src/api.js": "const { count } = require('./cart');\n\nfunction handle(req) {\n"
                      "  return { items: count(req.cart) };\n}\n\nmodule.exports = { handle };\n",
        "src/main.js": _NODE_MAIN.format(args="{ cart: undefined }"),
    }, {"src/cart.js": "function count(cart) {\n  return cart.items.length;\n}\n\nmodule.exports = { count };\n"},
        "src/cart.js", "cart.items.length", "raising-frame"),
    BugCase("node-json-parse", "node", {
        "src/config.js": "function load(raw) {\n  if (!raw) {\n    return {};\n  }\n  return JSON.parse(raw);\n}\n\n"
                         "module.exports = { load };\n",
        "src/api.js": "const { load } = require('./config');\n\nfunction handle(req) {\n"
                      "  return load(req.body);\n}\n\nmodule.exports = { handle };\n",
        "src/main.js": _NODE_MAIN.format(args="{ body: '<html>' }"),
    }, {"src/config.js": "function load(raw) {\n  return JSON.parse(raw);\n}\n\nmodule.exports = { load };\n"},
        "src/config.js", "JSON.parse(raw)", "under-library"),
    BugCase("node-caller-renamed-field", "node", {
        "src/tax.js": "function withTax(amount) {\n  const cents = Math.round(amount.valueOf() * 120);\n"
                      "  return cents / 100;\n}\n\nmodule.exports = { withTax };\n",
        "src/pricing.js": "const { withTax } = require('./tax');\n\nfunction price(order) {\n"
                          "  return withTax(order.total);\n}\n\nmodule.exports = { price };\n",
        "src/api.js": "const { price } = require('./pricing');\n\nfunction handle(req) {\n"
                      "  return { price: price(req.order) };\n}\n\nmodule.exports = { handle };\n",
        "src/main.js": _NODE_MAIN.format(args="{ order: { total: 10 } }"),
    }, {"src/pricing.js": "const { withTax } = require('./tax');\n\nfunction price(order) {\n"
                          "  return withTax(order.subtotal);\n}\n\nmodule.exports = { price };\n"},
        "src/pricing.js", "withTax(order.subtotal)", "caller"),
)

_JAVA_ORDERS = "src/main/java/com/acme/orders"
_JAVA_API = """\
package com.acme.orders;

public final class Api {
    private final OrderService orders = new OrderService();

    public String handle(String id) {
        return orders.describe(id);
    }
}
"""

JAVA_CASES = (
    BugCase("java-npe-customer", "java", {
        "src/main/java/com/acme/Main.java": _JAVA_MAIN,
        f"{_JAVA_ORDERS}/Api.java": _JAVA_API,
        f"{_JAVA_ORDERS}/Customer.java": "package com.acme.orders;\n\npublic record Customer(String email) {}\n",
        f"{_JAVA_ORDERS}/OrderService.java": """\
package com.acme.orders;

import java.util.Map;

public final class OrderService {
    private final Map<String, Customer> customers = Map.of("o1", new Customer("a@example.com"));

    public String describe(String orderId) {
        Customer customer = customers.getOrDefault(orderId, new Customer(""));
        return "order " + orderId + " for " + customer.email().toLowerCase();
    }
}
""",
    }, {f"{_JAVA_ORDERS}/OrderService.java": """\
package com.acme.orders;

import java.util.Map;

public final class OrderService {
    private final Map<String, Customer> customers = Map.of("o1", new Customer("a@example.com"));

    public String describe(String orderId) {
        Customer customer = customers.get(orderId);
        return "order " + orderId + " for " + customer.email().toLowerCase();
    }
}
"""}, f"{_JAVA_ORDERS}/OrderService.java", "customer.email().toLowerCase()", "raising-frame", ("o9",)),
    BugCase("java-parse-quantity", "java", {
        "src/main/java/com/acme/Main.java": _JAVA_MAIN,
        f"{_JAVA_ORDERS}/Api.java": _JAVA_API,
        f"{_JAVA_ORDERS}/OrderService.java": """\
package com.acme.orders;

public final class OrderService {
    public String describe(String line) {
        String[] parts = line.split(";");
        int quantity = parts.length > 1 ? Integer.parseInt(parts[1].trim()) : 1;
        return "order " + parts[0] + " x" + quantity;
    }
}
""",
    }, {f"{_JAVA_ORDERS}/OrderService.java": """\
package com.acme.orders;

public final class OrderService {
    public String describe(String line) {
        String[] parts = line.split(";");
        int quantity = Integer.parseInt(parts[1]);
        return "order " + parts[0] + " x" + quantity;
    }
}
"""}, f"{_JAVA_ORDERS}/OrderService.java", "Integer.parseInt(parts[1])", "under-library", ("o1; 2",)),
)

ALL_CASES = PY_CASES + NODE_CASES + JAVA_CASES
