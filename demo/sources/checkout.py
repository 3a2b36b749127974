"""checkout-service (Java, Spring style): a quantity parser, a coupon service, carts and customers."""

from __future__ import annotations

from demo.sources.commit import CommitSpec

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
