"""Source code of the demo's sample services, commit by commit (pure data; `demo.services` builds repos).

Each service is a list of commits; a commit is a message and the files it writes. The bugs are real:
the Python one is executed to get its tracebacks, the Java and Go traces are built from these lines.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommitSpec:
    """One commit: its message, the files it writes (path -> text), and whether a deploy runs it."""

    message: str
    files: dict[str, str]
    deployed: bool = False


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

_JAVA_PKG = "src/main/java/com/acme/checkout"

_CHECKOUT_CONTROLLER = '''package com.acme.checkout.web;

import com.acme.checkout.service.CheckoutService;
import com.acme.checkout.service.Receipt;
import org.springframework.web.bind.annotation.*;

@RestController
@RequestMapping("/checkout")
public class CheckoutController {
    private final CheckoutService checkoutService;
    private final QuantityParser quantityParser = new QuantityParser();

    public CheckoutController(CheckoutService checkoutService) {
        this.checkoutService = checkoutService;
    }

    @PostMapping("/{cartId}")
    public Receipt checkout(@PathVariable String cartId, @RequestParam long customerId) {
        return checkoutService.placeOrder(cartId, customerId);
    }

    @PutMapping("/{cartId}/lines/{line}")
    public void updateQuantity(@PathVariable String cartId, @PathVariable int line, @RequestBody String qty) {
        checkoutService.updateQuantity(cartId, line, quantityParser.parse(line, qty));
    }
}
'''

_QUANTITY_PARSER = '''package com.acme.checkout.web;

public class QuantityParser {
    public int parse(int line, String raw) {
        try {
            return Integer.parseInt(raw.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("Invalid quantity for line " + line, e);
        }
    }
}
'''

_CHECKOUT_SERVICE_V1 = '''package com.acme.checkout.service;

import com.acme.checkout.model.Customer;
import com.acme.checkout.repository.CartRepository;
import com.acme.checkout.repository.CustomerRepository;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

@Service
public class CheckoutService {
    private final CustomerRepository customers;
    private final CartRepository carts;
    private final CouponService coupons;

    public CheckoutService(CustomerRepository customers, CartRepository carts, CouponService coupons) {
        this.customers = customers;
        this.carts = carts;
        this.coupons = coupons;
    }

    @Transactional
    public Receipt placeOrder(String cartId, long customerId) {
        var cart = carts.findById(cartId);
        Customer customer = customers.findById(customerId);
        String country = customer.getAddress().getCountry();
        long total = coupons.apply(cart, cart.subtotal());
        return new Receipt(cartId, country, total);
    }

    @Transactional
    public void updateQuantity(String cartId, int line, int quantity) {
        carts.findById(cartId).setQuantity(line, quantity);
    }
}
'''

# v2 logs the checkout first: every line below moves down, the bug stays.
_CHECKOUT_SERVICE_V2 = _CHECKOUT_SERVICE_V1.replace(
    "import org.springframework.stereotype.Service;",
    "import org.slf4j.Logger;\nimport org.slf4j.LoggerFactory;\n"
    "import org.springframework.stereotype.Service;",
).replace(
    "public class CheckoutService {",
    "public class CheckoutService {\n"
    "    private static final Logger log = LoggerFactory.getLogger(CheckoutService.class);",
).replace(
    "        var cart = carts.findById(cartId);",
    '        log.info("checkout cart={} customer={}", cartId, customerId);\n'
    "        var cart = carts.findById(cartId);",
)

_COUPON_SERVICE = '''package com.acme.checkout.service;

import com.acme.checkout.model.Cart;
import java.util.Map;
import java.util.Objects;
import org.springframework.stereotype.Service;

@Service
public class CouponService {
    private static final Map<String, Integer> PERCENT_OFF = Map.of("WELCOME10", 10, "SPRING15", 15);

    public long apply(Cart cart, long subtotal) {
        if (!cart.hasCoupon()) {
            return subtotal;
        }
        String code = Objects.requireNonNull(cart.getCouponCode(), "couponCode");
        return subtotal * (100 - PERCENT_OFF.getOrDefault(code, 0)) / 100;
    }
}
'''

_CUSTOMER = '''package com.acme.checkout.model;

public record Customer(long id, String name, Address address) {
    public Address getAddress() {
        return address;
    }
}
'''

_ADDRESS = '''package com.acme.checkout.model;

public record Address(String street, String city, String country) {
    public String getCountry() {
        return country;
    }
}
'''

_CART = '''package com.acme.checkout.model;

import java.util.ArrayList;
import java.util.List;

public class Cart {
    private final List<Integer> quantities = new ArrayList<>();
    private final List<Long> prices = new ArrayList<>();
    private boolean couponApplied;
    private String couponCode;

    public boolean hasCoupon() {
        return couponApplied;
    }

    public String getCouponCode() {
        return couponCode;
    }

    public long subtotal() {
        long sum = 0;
        for (int i = 0; i < prices.size(); i++) {
            sum += prices.get(i) * quantities.get(i);
        }
        return sum;
    }

    public void setQuantity(int line, int quantity) {
        quantities.set(line, quantity);
    }
}
'''

_CUSTOMER_REPOSITORY = '''package com.acme.checkout.repository;

import com.acme.checkout.model.Customer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.stereotype.Repository;

@Repository
public class CustomerRepository {
    private final Map<Long, Customer> byId = new ConcurrentHashMap<>();

    /** Returns null when the customer is unknown. */
    public Customer findById(long id) {
        return byId.get(id);
    }
}
'''

_CART_REPOSITORY = '''package com.acme.checkout.repository;

import com.acme.checkout.model.Cart;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.stereotype.Repository;

@Repository
public class CartRepository {
    private final Map<String, Cart> byId = new ConcurrentHashMap<>();

    public Cart findById(String id) {
        return byId.computeIfAbsent(id, key -> new Cart());
    }
}
'''

_RECEIPT = '''package com.acme.checkout.service;

public record Receipt(String cartId, String country, long total) {}
'''

CHECKOUT_SERVICE: list[CommitSpec] = [
    CommitSpec("Checkout service skeleton", {
        "pom.xml": "<project>\n  <groupId>com.acme</groupId>\n  <artifactId>checkout-service</artifactId>\n"
                   "</project>\n",
        f"{_JAVA_PKG}/model/Customer.java": _CUSTOMER,
        f"{_JAVA_PKG}/model/Address.java": _ADDRESS,
        f"{_JAVA_PKG}/model/Cart.java": _CART,
        f"{_JAVA_PKG}/repository/CustomerRepository.java": _CUSTOMER_REPOSITORY,
        f"{_JAVA_PKG}/repository/CartRepository.java": _CART_REPOSITORY,
    }),
    CommitSpec("Place orders with coupons; edit quantities", {
        f"{_JAVA_PKG}/service/Receipt.java": _RECEIPT,
        f"{_JAVA_PKG}/service/CouponService.java": _COUPON_SERVICE,
        f"{_JAVA_PKG}/service/CheckoutService.java": _CHECKOUT_SERVICE_V1,
        f"{_JAVA_PKG}/web/QuantityParser.java": _QUANTITY_PARSER,
        f"{_JAVA_PKG}/web/CheckoutController.java": _CHECKOUT_CONTROLLER,
    }, deployed=True),
    CommitSpec("Log every checkout", {
        f"{_JAVA_PKG}/service/CheckoutService.java": _CHECKOUT_SERVICE_V2,
    }, deployed=True),
]

_LEDGER_GO = '''package ledger

import "fmt"

type Entry struct {
	Account string
	Cents   int64
}

type Ledger struct {
	balances map[string]int64
}

// Settle books a batch and returns the last entry, which the caller echoes back.
func (l *Ledger) Settle(batch []Entry) (Entry, error) {
	if l.balances == nil {
		return Entry{}, fmt.Errorf("ledger not opened")
	}
	for _, e := range batch {
		l.balances[e.Account] += e.Cents
	}
	last := batch[len(batch)]
	return last, nil
}
'''

_HANDLER_GO = '''package api

import (
	"encoding/json"
	"net/http"

	"github.com/acme/payments/internal/ledger"
)

type Handler struct {
	Ledger *ledger.Ledger
}

func (h *Handler) settle(w http.ResponseWriter, r *http.Request) {
	var batch []ledger.Entry
	if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	last, err := h.Ledger.Settle(batch)
	if err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	_ = json.NewEncoder(w).Encode(last)
}
'''

PAYMENTS_SERVICE: list[CommitSpec] = [
    CommitSpec("Payments ledger with a settle endpoint", {
        "go.mod": "module github.com/acme/payments\n\ngo 1.22\n",
        "internal/ledger/ledger.go": _LEDGER_GO,
        "internal/api/handler.go": _HANDLER_GO,
    }, deployed=True),
]
