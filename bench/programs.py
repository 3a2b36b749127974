"""Small buggy services in Python, Java, Node.js and Go whose traces `bench.realtraces` gets by running them.

Each service is a little framework (a request passes through several middleware layers, as in a real
web stack) and an application package of its own domain with six bugs, one per route. A program runs
the routes it is given, each with the request id it is given, and prints every failure between marker
lines: `### route<TAB>exception type<TAB>message`, the trace exactly as the runtime printed it, then
`### end`. Go panics are not caught: each route runs in a process of its own, and the trace is what the
runtime prints as the process dies. `__DOMAIN__` and `__CLASS__` are replaced by the service's domain
(`orders`, `Orders`); every application file starts with `__SHIFT__`, the blank lines a deploy adds.
"""

from __future__ import annotations

ROUTES = ("lookup", "customer", "quantity", "pricing", "fee", "item")
"""The bug each service has: every language has one at each route."""

MARKER_ID = "4242424242"
"""The request id the programs put in their messages; each event of the stream gets a fresh one."""

PYTHON = {
    "site-packages/kit/__init__.py": "",
    "site-packages/kit/web.py": '''\
"""A tiny web framework: a request passes through middleware, then the view runs."""


class Request:
    def __init__(self, route, request_id):
        self.route = route
        self.request_id = request_id
        self.user = None


def handle(view, request):
    return _authenticate(view, request)


def _authenticate(view, request):
    request.user = "svc"
    return _trace(view, request)


def _trace(view, request):
    request.span = hex(id(request))
    return _with_retry(view, request)


def _with_retry(view, request, attempts=1):
    for _ in range(attempts):
        return _run_view(view, request)
    return None


def _run_view(view, request):
    return view(request)
''',
    "app/__init__.py": "",
    "app/__DOMAIN__/__init__.py": "",
    "app/__DOMAIN__/store.py": '''__SHIFT___ROWS = {
    "__DOMAIN___1": {"id": 1, "price": 10, "items": [1, 2], "customer": None, "fee": "3"},
}


def load(key):
    return _ROWS[key]
''',
    "app/__DOMAIN__/service.py": '''__SHIFT__from app.__DOMAIN__ import store


class PricingError(Exception):
    pass


def lookup(request_id):
    return store.load(f"__DOMAIN___{request_id}")


def customer(request_id):
    row = store.load("__DOMAIN___1")
    return row["customer"].name


def quantity(request_id):
    return int(f"{request_id}x")


def pricing(request_id):
    row = store.load("__DOMAIN___1")
    try:
        return row["price"] / (row["id"] - 1)
    except ZeroDivisionError as exc:
        raise PricingError(f"cannot price __DOMAIN__ {request_id}") from exc


def fee(request_id):
    row = store.load("__DOMAIN___1")
    return row["fee"] + 1


def item(request_id):
    row = store.load("__DOMAIN___1")
    return row["items"][5]
''',
    "app/__DOMAIN__/views.py": '''__SHIFT__from app.__DOMAIN__ import service


def view(request):
    handler = getattr(service, request.route)
    return {"result": handler(request.request_id)}
''',
    "main.py": '''import json
import sys
import traceback

from kit import web
from app.__DOMAIN__ import views


def type_name(exc):
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def chain(exc):
    found = []
    while exc is not None:
        frames = [[f.filename, f.name, f.lineno] for f in traceback.extract_tb(exc.__traceback__)]
        found.append({"type": type_name(exc), "value": str(exc), "frames": frames})
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return found


for argument in sys.argv[1:]:
    route, request_id = argument.split("=")
    try:
        web.handle(views.view, web.Request(route, request_id))
    except Exception as exc:
        print(f"### {route}\\t{type_name(exc)}\\t{exc}")
        print("".join(traceback.format_exception(exc)), end="")
        print("### chain " + json.dumps(chain(exc)))
        print("### end")
''',
}

JAVA = {
    "com/acme/kit/Router.java": '''\
package com.acme.kit;

import java.util.function.Function;

/** A tiny web framework: a request passes through filters, then the handler runs. */
public final class Router {
    private final Function<String, Object> handler;

    public Router(Function<String, Object> handler) {
        this.handler = handler;
    }

    public Object dispatch(String requestId) {
        return authenticate(requestId);
    }

    private Object authenticate(String requestId) {
        return trace(requestId);
    }

    private Object trace(String requestId) {
        return withTransaction(requestId);
    }

    private Object withTransaction(String requestId) {
        return invoke(requestId);
    }

    private Object invoke(String requestId) {
        return handler.apply(requestId);
    }
}
''',
    "com/acme/__DOMAIN__/__CLASS__Repository.java": '''__SHIFT__package com.acme.__DOMAIN__;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

final class __CLASS__Repository {
    private final Map<String, Record> rows = new HashMap<>();

    __CLASS__Repository() {
        rows.put("1", new Record(1, null, List.of(1, 2)));
    }

    Record find(String id) {
        Record found = rows.get(id);
        if (found == null) {
            throw new IllegalStateException("__DOMAIN__ " + id + " not found");
        }
        return found;
    }

    void save(Record record, String id) throws StoreException {
        throw new StoreException("deadlock detected while saving __DOMAIN__ " + id);
    }
}
''',
    "com/acme/__DOMAIN__/Record.java": '''__SHIFT__package com.acme.__DOMAIN__;

import java.util.List;

final class Record {
    final int id;
    final Customer customer;
    final List<Integer> items;

    Record(int id, Customer customer, List<Integer> items) {
        this.id = id;
        this.customer = customer;
        this.items = items;
    }
}
''',
    "com/acme/__DOMAIN__/Customer.java": '''__SHIFT__package com.acme.__DOMAIN__;

final class Customer {
    String getName() {
        return "c";
    }
}
''',
    "com/acme/__DOMAIN__/StoreException.java": '''__SHIFT__package com.acme.__DOMAIN__;

final class StoreException extends Exception {
    StoreException(String message) {
        super(message);
    }
}
''',
    "com/acme/__DOMAIN__/__CLASS__Service.java": '''__SHIFT__package com.acme.__DOMAIN__;

import java.util.ArrayList;
import java.util.List;

public final class __CLASS__Service {
    private final __CLASS__Repository repository = new __CLASS__Repository();

    public Object handle(String route, String id) {
        switch (route) {
            case "lookup": return repository.find(id);
            case "customer": return repository.find("1").customer.getName();
            case "quantity": return Integer.parseInt(id + "x");
            case "pricing": return save(id);
            case "fee": return List.of(1, 2).get(id.length());
            default: return items(id);
        }
    }

    private Object save(String id) {
        try {
            repository.save(repository.find("1"), id);
            return id;
        } catch (StoreException e) {
            throw new IllegalStateException("could not save __DOMAIN__ " + id, e);
        }
    }

    private Object items(String id) {
        List<Integer> items = new ArrayList<>(repository.find("1").items);
        items.forEach(item -> items.add(item + id.length()));
        return items;
    }
}
''',
    "com/acme/Main.java": '''package com.acme;

import com.acme.kit.Router;

public final class Main {
    public static void main(String[] args) {
        com.acme.__DOMAIN__.__CLASS__Service service = new com.acme.__DOMAIN__.__CLASS__Service();
        for (String argument : args) {
            String[] parts = argument.split("=");
            try {
                new Router(id -> service.handle(parts[0], id)).dispatch(parts[1]);
            } catch (RuntimeException e) {
                System.out.println("### " + parts[0] + "\\t" + e.getClass().getName() + "\\t" + e.getMessage());
                e.printStackTrace(System.out);
                System.out.println("### end");
            }
        }
    }
}
''',
}

NODE = {
    "node_modules/kit/index.js": '''\
'use strict';
// A tiny web framework: a request passes through middleware, then the handler runs.

function dispatch(handler, request) {
  return authenticate(handler, request);
}

function authenticate(handler, request) {
  request.user = 'svc';
  return trace(handler, request);
}

function trace(handler, request) {
  request.span = Date.now().toString(16);
  return [handler].map((h) => runHandler(h, request))[0];
}

function runHandler(handler, request) {
  return handler(request);
}

module.exports = { dispatch };
''',
    "src/__DOMAIN__/store.js": '''__SHIFT__'use strict';

const rows = new Map([['1', { id: 1, price: 10, items: [1, 2], customer: undefined }]]);

function load(id) {
  return rows.get(id);
}

module.exports = { load };
''',
    "src/__DOMAIN__/service.js": '''__SHIFT__'use strict';
const store = require('./store');

class PricingError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'PricingError';
  }
}

const routes = {
  lookup(id) {
    return store.load(id).price;
  },
  customer() {
    return store.load('1').customer.name;
  },
  quantity(id) {
    return new Array(-Number(id));
  },
  pricing(id) {
    try {
      return JSON.parse(`{"__DOMAIN__": ${id}x}`);
    } catch (err) {
      throw new PricingError(`cannot price __DOMAIN__ ${id}`, { cause: err });
    }
  },
  fee(id) {
    return store.load('1').items.reduce((total, item) => total + item.fee.amount, Number(id));
  },
  item(id) {
    return BigInt(`${id}.5`);
  },
};

function handle(request) {
  return routes[request.route](request.id);
}

module.exports = { handle };
''',
    "main.js": '''\
'use strict';
const kit = require('kit');
const service = require('./src/__DOMAIN__/service');

for (const argument of process.argv.slice(2)) {
  const [route, id] = argument.split('=');
  try {
    kit.dispatch(service.handle, { route, id });
  } catch (err) {
    console.log(`### ${route}\\t${err.name}\\t${err.message}`);
    console.log(err.stack);
    console.log('### end');
  }
}
''',
}

GO = {
    "go.mod": "module github.com/acme/__DOMAIN__\n\ngo 1.22\n",
    "internal/kit/router.go": '''\
// Package kit is a tiny web framework: a request passes through middleware, then the handler runs.
package kit

type Handler func(id string) any

func Dispatch(handler Handler, id string) any {
	return authenticate(handler, id)
}

func authenticate(handler Handler, id string) any {
	return trace(handler, id)
}

func trace(handler Handler, id string) any {
	return recoverer(handler, id)
}

func recoverer(handler Handler, id string) any {
	return handler(id)
}
''',
    "internal/__DOMAIN__/service.go": '''__SHIFT__package __DOMAIN__

import (
	"fmt"
	"strconv"
)

type Customer struct{ Name string }

type Record struct {
	ID       int
	Customer *Customer
	Items    []int
	Counts   map[string]int
}

type Service struct{ rows map[string]*Record }

func New() *Service {
	return &Service{rows: map[string]*Record{"1": {ID: 1, Items: []int{1, 2}}}}
}

func (s *Service) Handle(route, id string) any {
	switch route {
	case "lookup":
		return s.rows[id].ID
	case "customer":
		return s.rows["1"].Customer.Name
	case "quantity":
		n, _ := strconv.Atoi(id)
		return s.rows["1"].Items[n%7+2]
	case "pricing":
		return s.price(id)
	case "fee":
		s.rows["1"].Counts[id]++
		return nil
	default:
		var v any = id
		return v.(int)
	}
}

func (s *Service) price(id string) any {
	panic(fmt.Sprintf("cannot price __DOMAIN__ %s: no tariff", id))
}
''',
    "main.go": '''package main

import (
	"os"
	"strings"
	"sync"

	"github.com/acme/__DOMAIN__/internal/__DOMAIN__"
	"github.com/acme/__DOMAIN__/internal/kit"
)

func serve(route, id string) {
	var wg sync.WaitGroup
	wg.Add(1)
	service := __DOMAIN__.New()
	go func() {
		kit.Dispatch(func(id string) any { return service.Handle(route, id) }, id)
		wg.Done() // not deferred: a panicking request must take the process down before main returns
	}()
	wg.Wait()
}

func main() {
	parts := strings.SplitN(os.Args[1], "=", 2)
	serve(parts[0], parts[1])
}
''',
}
