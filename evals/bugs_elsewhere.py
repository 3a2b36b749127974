"""Bugs whose fix is in a file the trace never enters: a constant, a renamed export or attribute, a lookup
that now returns nothing, a configuration file, a producer that writes the wrong key, a port or a path
in the configuration (the last two fail in the runtime with no application frame at all).

Each is a real program, really run like the cases of `evals.bugs`. The buggy commit also bumps the
release version in another file, as release commits do, so the history prior names two files, not one;
the evaluation reports every figure with and without history.
"""

from __future__ import annotations

from evals.bugs import BugCase

_PY_MAIN = "from app.api import handle\n\nhandle({args})\n"
_NODE_MAIN = ("const {{ handle }} = require('./api');\n\ntry {{\n  handle({args});\n}} catch (err) {{\n"
              "  process.stderr.write(err.stack + '\\n');\n  process.exit(1);\n}}\n")
_PY_API = ("from app.{module} import {function}\n\n\ndef handle(request):\n"
           "    return {{\"result\": {function}(request)}}\n")
_PY_VERSION = {"app/version.py": 'VERSION = "1.4.2"\n'}
_PY_VERSION_BUG = {"app/version.py": 'VERSION = "1.5.0"\n'}


def _package(name: str, version: str) -> dict[str, str]:
    return {"package.json": f'{{"name": "{name}", "version": "{version}", "main": "src/main.js"}}\n'}


def _py(name: str, module: str, function: str, args: str) -> dict[str, str]:
    """The frame of a small Python service: package, API handler calling `module.function`, entry."""
    return {"app/__init__.py": "", "app/api.py": _PY_API.format(module=module, function=function),
            "app/__main__.py": _PY_MAIN.format(args=args), **_PY_VERSION}


PY_ELSEWHERE = (
    BugCase("py-constant-zero", "python", {
        **_py("batching", "batching", "batches", '{"items": [1, 2, 3]}'),
        "app/limits.py": "MAX_BATCH = 50\n",
        "app/batching.py": "from app.limits import MAX_BATCH\n\n\ndef batches(request):\n"
                           "    items = request[\"items\"]\n    count = -(-len(items) // MAX_BATCH)\n"
                           "    return [items[i * MAX_BATCH:(i + 1) * MAX_BATCH] for i in range(count)]\n",
    }, {"app/limits.py": "# batch size now comes from the queue's own limit\nMAX_BATCH = 0\n",
        **_PY_VERSION_BUG},
        "app/limits.py", "MAX_BATCH = 0", "not-in-trace"),
    BugCase("py-import-renamed", "python", {
        **_py("pricing", "pricing", "total", '{"amount": 12}'),
        "app/rates.py": "EUR = 1.0\nUSD = 1.08\n",
        "app/pricing.py": "from app.rates import EUR\n\n\ndef total(request):\n    return request[\"amount\"] * EUR\n",
    }, {"app/rates.py": 'RATES = {"EUR": 1.0, "USD": 1.08}\n', **_PY_VERSION_BUG},
        "app/rates.py", "RATES =", "not-in-trace"),
    BugCase("py-attribute-renamed", "python", {
        **_py("orders", "service", "summary", '{"items": [3, 4]}'),
        "app/models.py": "class Order:\n    def __init__(self, items):\n        self.items = items\n\n"
                         "    @property\n    def total(self):\n        return sum(self.items)\n",
        "app/service.py": "from app.models import Order\n\n\ndef summary(request):\n"
                          "    order = Order(request[\"items\"])\n    return {\"total\": order.total}\n",
    }, {"app/models.py": "class Order:\n    def __init__(self, items):\n        self.items = items\n\n"
                         "    @property\n    def grand_total(self):\n        return sum(self.items)\n",
        **_PY_VERSION_BUG},
        "app/models.py", "def grand_total", "not-in-trace"),
    BugCase("py-lookup-returns-none", "python", {
        **_py("mailer", "mailer", "recipient", '{"user": "u9"}'),
        "app/users.py": 'GUEST = {"email": "guest@example.com"}\nUSERS = {"u1": {"email": "a@example.com"}}\n\n\n'
                        "def find_user(user_id):\n    return USERS.get(user_id, GUEST)\n",
        "app/mailer.py": "from app.users import find_user\n\n\ndef recipient(request):\n"
                         '    user = find_user(request["user"])\n    return user["email"].lower()\n',
    }, {"app/users.py": 'USERS = {"u1": {"email": "a@example.com"}}\n\n\n'
                        "def find_user(user_id):\n    return USERS.get(user_id)\n",
        **_PY_VERSION_BUG},
        "app/users.py", "return USERS.get(user_id)", "not-in-trace"),
    BugCase("py-config-type", "python", {
        **_py("client", "client", "backoff", '{"attempt": 2}'),
        "app/settings.json": '{"timeout_s": 2.5, "retries": 3}\n',
        "app/client.py": "import json\nfrom pathlib import Path\n\n"
                         'SETTINGS = json.loads((Path(__file__).parent / "settings.json").read_text())\n\n\n'
                         "def backoff(request):\n    return SETTINGS[\"timeout_s\"] / 2 * request[\"attempt\"]\n",
    }, {"app/settings.json": '{"timeout_s": "2.5s", "retries": 3}\n', **_PY_VERSION_BUG},
        "app/settings.json", '"timeout_s"', "not-in-trace"),
    BugCase("py-producer-key", "python", {
        **_py("invoices", "invoices", "invoice", '{"id": "o1", "customer": "c7"}'),
        "app/records.py": "def to_record(order):\n"
                          '    return {"order_id": order["id"], "customer_id": order["customer"]}\n',
        "app/invoices.py": "from app.records import to_record\n\n\ndef invoice(request):\n"
                           "    record = to_record(request)\n"
                           '    return f"invoice for {record[\'customer_id\']}"\n',
    }, {"app/records.py": "def to_record(order):\n"
                          '    return {"orderId": order["id"], "customerId": order["customer"]}\n',
        **_PY_VERSION_BUG},
        "app/records.py", '"customerId"', "not-in-trace"),
)

_NODE_API = ("const {module} = require('./{module}');\n\nfunction handle(req) {{\n  return {body};\n}}\n\n"
             "module.exports = {{ handle }};\n")

NODE_ELSEWHERE = (
    BugCase("node-export-renamed", "node", {
        "src/pricing.js": "function computeTotal(order) {\n  return order.items.reduce((a, b) => a + b, 0);\n}\n\n"
                          "module.exports = { computeTotal };\n",
        "src/api.js": _NODE_API.format(module="pricing", body="{ total: pricing.computeTotal(req.order) }"),
        "src/main.js": _NODE_MAIN.format(args="{ order: { items: [2, 3] } }"),
        **_package("pricing", "1.4.2"),
    }, {"src/pricing.js": "function computeOrderTotal(order) {\n  return order.items.reduce((a, b) => a + b, 0);\n}\n\n"
                          "module.exports = { computeOrderTotal };\n",
        **_package("pricing", "1.5.0")},
        "src/pricing.js", "module.exports = { computeOrderTotal }", "not-in-trace"),
    BugCase("node-lookup-undefined", "node", {
        "src/catalog.js": "const PRODUCTS = new Map([['p1', { name: 'Lamp' }]]);\n"
                          "const UNKNOWN = { name: 'unknown' };\n\n"
                          "function lookupProduct(id) {\n  return PRODUCTS.get(id) || UNKNOWN;\n}\n\n"
                          "module.exports = { lookupProduct };\n",
        "src/api.js": "const { lookupProduct } = require('./catalog');\n\nfunction handle(req) {\n"
                      "  const product = lookupProduct(req.id);\n  return { label: product.name.toUpperCase() };\n}\n\n"
                      "module.exports = { handle };\n",
        "src/main.js": _NODE_MAIN.format(args="{ id: 'p9' }"),
        **_package("catalog", "1.4.2"),
    }, {"src/catalog.js": "const PRODUCTS = new Map([['p1', { name: 'Lamp' }]]);\n\n"
                          "function lookupProduct(id) {\n  return PRODUCTS.get(id);\n}\n\n"
                          "module.exports = { lookupProduct };\n",
        **_package("catalog", "1.5.0")},
        "src/catalog.js", "return PRODUCTS.get(id);", "not-in-trace"),
    BugCase("node-refused-port", "node", {
        "src/config.js": "module.exports = { listen: 47391, upstream: { host: '127.0.0.1', port: 47391 } };\n",
        "src/main.js": "const net = require('net');\nconst config = require('./config');\n\n"
                       "const server = net.createServer((socket) => socket.end('ok\\n'));\n"
                       "server.listen(config.listen, () => {\n"
                       "  const client = net.connect(config.upstream.port, config.upstream.host, () => {\n"
                       "    client.end();\n    server.close();\n  });\n"
                       "  client.on('error', (err) => {\n    process.stderr.write(err.stack + '\\n');\n"
                       "    process.exit(1);\n  });\n});\n",
        **_package("relay", "1.4.2"),
    }, {"src/config.js": "module.exports = { listen: 47391, upstream: { host: '127.0.0.1', port: 47392 } };\n",
        **_package("relay", "1.5.0")},
        "src/config.js", "port: 47392", "not-in-trace"),
    BugCase("node-missing-file", "node", {
        "src/loader.js": "const fs = require('fs');\nconst path = require('path');\n\n"
                         "function loadSettings(done) {\n"
                         "  fs.readFile(path.join(__dirname, '..', 'conf', 'app.json'), 'utf8', (err, text) => {\n"
                         "    if (err) {\n      done(err);\n      return;\n    }\n"
                         "    done(null, JSON.parse(text));\n  });\n}\n\n"
                         "module.exports = { loadSettings };\n",
        "conf/app.json": '{"name": "relay"}\n',
        "src/main.js": "const { loadSettings } = require('./loader');\n\nloadSettings((err, settings) => {\n"
                       "  if (err) {\n    process.stderr.write(err.stack + '\\n');\n    process.exit(1);\n  }\n"
                       "  process.stdout.write(settings.name + '\\n');\n});\n",
        **_package("loader", "1.4.2"),
    }, {"src/loader.js": "const fs = require('fs');\nconst path = require('path');\n\n"
                         "function loadSettings(done) {\n"
                         "  fs.readFile(path.join(__dirname, '..', 'config', 'app.json'), 'utf8', (err, text) => {\n"
                         "    if (err) {\n      done(err);\n      return;\n    }\n"
                         "    done(null, JSON.parse(text));\n  });\n}\n\n"
                         "module.exports = { loadSettings };\n",
        **_package("loader", "1.5.0")},
        "src/loader.js", "'config', 'app.json'", "not-in-trace"),
)

_JAVA_ORDERS = "src/main/java/com/acme/orders"
_JAVA_MAIN = """\
package com.acme;

public final class Main {
    public static void main(String[] args) {
        try {
            System.out.println(new com.acme.orders.OrderService().describe(args.length > 0 ? args[0] : ""));
        } catch (RuntimeException e) {
            e.printStackTrace();
            System.exit(1);
        }
    }
}
"""
_POM = ("<project><modelVersion>4.0.0</modelVersion><groupId>com.acme</groupId><artifactId>orders</artifactId>"
        "<version>{}</version></project>\n")
_JAVA_POM = {"pom.xml": _POM.format("1.4.2")}
_JAVA_POM_BUG = {"pom.xml": _POM.format("1.5.0")}

JAVA_ELSEWHERE = (
    BugCase("java-registry-null", "java", {
        "src/main/java/com/acme/Main.java": _JAVA_MAIN, **_JAVA_POM,
        f"{_JAVA_ORDERS}/Currency.java": "package com.acme.orders;\n\npublic record Currency(double rate) {}\n",
        f"{_JAVA_ORDERS}/Registry.java": """\
package com.acme.orders;

import java.util.Map;

public final class Registry {
    private static final Currency BASE = new Currency(1.0);
    private final Map<String, Currency> byCode = Map.of("EUR", BASE, "USD", new Currency(1.08));

    public Currency lookup(String code) {
        return byCode.getOrDefault(code, BASE);
    }
}
""",
        f"{_JAVA_ORDERS}/OrderService.java": """\
package com.acme.orders;

public final class OrderService {
    private final Registry registry = new Registry();

    public String describe(String code) {
        return "rate " + registry.lookup(code).rate();
    }
}
""",
    }, {f"{_JAVA_ORDERS}/Registry.java": """\
package com.acme.orders;

import java.util.Map;

public final class Registry {
    private final Map<String, Currency> byCode = Map.of("EUR", new Currency(1.0), "USD", new Currency(1.08));

    public Currency lookup(String code) {
        return byCode.get(code);
    }
}
""", **_JAVA_POM_BUG}, f"{_JAVA_ORDERS}/Registry.java", "return byCode.get(code);", "not-in-trace", ("GBP",)),
    BugCase("java-constant-zero", "java", {
        "src/main/java/com/acme/Main.java": _JAVA_MAIN, **_JAVA_POM,
        f"{_JAVA_ORDERS}/Limits.java": "package com.acme.orders;\n\npublic final class Limits {\n"
                                       "    public static final int PAGE_SIZE = 20;\n\n    private Limits() {}\n}\n",
        f"{_JAVA_ORDERS}/OrderService.java": """\
package com.acme.orders;

public final class OrderService {
    public String describe(String count) {
        int items = Integer.parseInt(count.isBlank() ? "45" : count);
        int pages = (items + Limits.PAGE_SIZE - 1) / Limits.PAGE_SIZE;
        return items + " items on " + pages + " pages";
    }
}
""",
    }, {f"{_JAVA_ORDERS}/Limits.java": "package com.acme.orders;\n\npublic final class Limits {\n"
                                       "    // pages are sized by the client now\n"
                                       "    public static final int PAGE_SIZE = 0;\n\n    private Limits() {}\n}\n",
        **_JAVA_POM_BUG}, f"{_JAVA_ORDERS}/Limits.java", "PAGE_SIZE = 0", "not-in-trace"),
)

ELSEWHERE_CASES = PY_ELSEWHERE + NODE_ELSEWHERE + JAVA_ELSEWHERE
