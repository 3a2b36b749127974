"""The labelled grouping corpus: real-world-shaped failures, each seen several ways, plus look-alikes.

Every `Group` is one failure. Its template is a trace as the runtime prints it, with the parts that
really vary between occurrences marked: `@N@` is an in-app line number (it moves when a deploy adds
lines above it), `{id}`, `{ip}`, `{hex}`, `{addr}`, `{gid}`, `{small}`, `{lambda}`, `{proxy}`,
`{site}` are drawn afresh per occurrence. Groups that share a `family` are look-alikes: same
exception type or same wrapper or same message shape, different failure; they must not merge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Language = Literal["java", "python", "node", "go", "message"]


@dataclass(frozen=True)
class Group:
    """One failure, the shapes it arrives in, and the text its occurrences are drawn from."""

    label: str
    language: Language
    family: str
    shapes: tuple[str, ...]
    message: str
    trace: str = ""


_SPRING_TAIL = """\
	at java.base/jdk.internal.reflect.DirectMethodHandleAccessor.invoke(DirectMethodHandleAccessor.java:103)
	at java.base/java.lang.reflect.Method.invoke(Method.java:580)
	at org.springframework.web.method.support.InvocableHandlerMethod.doInvoke(InvocableHandlerMethod.java:255)
	at org.springframework.web.servlet.mvc.method.annotation.ServletInvocableHandlerMethod.invokeAndHandle(\
ServletInvocableHandlerMethod.java:118)
	at org.springframework.web.servlet.DispatcherServlet.doDispatch(DispatcherServlet.java:1089)
	at org.springframework.web.servlet.FrameworkServlet.processRequest(FrameworkServlet.java:1014)
	at jakarta.servlet.http.HttpServlet.service(HttpServlet.java:590)
	at org.apache.catalina.core.ApplicationFilterChain.internalDoFilter(ApplicationFilterChain.java:206)
	at org.springframework.web.filter.OncePerRequestFilter.doFilter(OncePerRequestFilter.java:116)
	at org.apache.catalina.core.ApplicationFilterChain.internalDoFilter(ApplicationFilterChain.java:175)
	at org.apache.tomcat.util.threads.ThreadPoolExecutor$Worker.run(ThreadPoolExecutor.java:659)
	at java.base/java.lang.Thread.run(Thread.java:1583)"""

_SPRING_PROXY = """\
	at com.acme.orders.OrderService$$EnhancerBySpringCGLIB$${hex}.{method}(<generated>)
	at jdk.internal.reflect.GeneratedMethodAccessor{proxy}.invoke(Unknown Source)
	at java.base/java.lang.reflect.Method.invoke(Method.java:568)
	at org.springframework.aop.support.AopUtils.invokeJoinpointUsingReflection(AopUtils.java:352)
	at org.springframework.aop.framework.ReflectiveMethodInvocation.proceed(ReflectiveMethodInvocation.java:163)
	at org.springframework.transaction.interceptor.TransactionInterceptor.invoke(TransactionInterceptor.java:119)
	at org.springframework.aop.framework.CglibAopProxy$DynamicAdvisedInterceptor.intercept(CglibAopProxy.java:765)
	at com.sun.proxy.$Proxy{proxy}.{method}(Unknown Source)"""


def _java_npe(method: str, getter: str, line: str) -> str:
    return (
        f'java.lang.NullPointerException: Cannot invoke "com.acme.orders.Payment.{getter}()" because the '
        f'return value of "com.acme.orders.Order.getPayment()" is null\n'
        f"\tat com.acme.orders.OrderService.{method}(OrderService.java:@{line}@)\n"
        + _SPRING_PROXY.replace("{method}", method)
        + f"\n\tat com.acme.orders.OrderController.lambda${method}${{lambda}}(OrderController.java:@57@)\n"
        "\tat java.base/java.util.Optional.map(Optional.java:260)\n"
        f"\tat com.acme.orders.OrderController.{method}(OrderController.java:@55@)\n" + _SPRING_TAIL
    )


def _java_wrapped(cause: str, cause_frames: str) -> str:
    return (
        "org.springframework.dao.CannotAcquireLockException: could not execute statement "  # noqa: S608 - a logged message, not a query
        "[update stock set reserved=? where sku=?]; SQL [n/a]\n"
        "\tat org.springframework.orm.jpa.vendor.HibernateJpaDialect.convertHibernateAccessException("
        "HibernateJpaDialect.java:309)\n"
        "\tat org.springframework.orm.jpa.JpaTransactionManager.doCommit(JpaTransactionManager.java:565)\n"
        "\tat com.acme.inventory.StockService.reserve(StockService.java:@88@)\n"
        "\tat com.acme.inventory.ReservationJob.lambda$run${lambda}(ReservationJob.java:@41@)\n"
        "\tat java.base/java.util.ArrayList.forEach(ArrayList.java:1596)\n"
        "\tat com.acme.inventory.ReservationJob.run(ReservationJob.java:@39@)\n"
        "\tat org.springframework.scheduling.support.ScheduledMethodRunnable.run(ScheduledMethodRunnable.java:84)\n"
        "\tat java.base/java.util.concurrent.FutureTask.runAndReset(FutureTask.java:358)\n"
        "\tat java.base/java.lang.Thread.run(Thread.java:1583)\n"
        f"Caused by: {cause}\n{cause_frames}\n\t... 9 more"
    )


_PG_FRAMES = """\
	at org.postgresql.core.v3.QueryExecutorImpl.receiveErrorResponse(QueryExecutorImpl.java:2725)
	at org.postgresql.core.v3.QueryExecutorImpl.processResults(QueryExecutorImpl.java:2412)
	at org.postgresql.jdbc.PgPreparedStatement.executeUpdate(PgPreparedStatement.java:152)
	at com.zaxxer.hikari.pool.HikariProxyPreparedStatement.executeUpdate(HikariProxyPreparedStatement.java)"""
_SOCKET_FRAMES = """\
	at java.base/sun.nio.ch.NioSocketImpl.timedRead(NioSocketImpl.java:288)
	at java.base/sun.nio.ch.NioSocketImpl.implRead(NioSocketImpl.java:314)
	at org.postgresql.core.VisibleBufferedInputStream.readMore(VisibleBufferedInputStream.java:161)
	at org.postgresql.core.PGStream.receiveChar(PGStream.java:467)"""

_DJANGO = """\
Traceback (most recent call last):
  File "{site}/django/core/handlers/exception.py", line 55, in inner
    response = get_response(request)
  File "{site}/django/core/handlers/base.py", line 197, in _get_response
    response = wrapped_callback(request, *callback_args, **callback_kwargs)
"""


def _py_lookup(view: str, function: str, key: str) -> str:
    return (
        _DJANGO + f'  File "/app/orders/views.py", line @31@, in {view}\n'
        f"    record = service.{function}(pk)\n"
        f'  File "/app/orders/service.py", line @48@, in {function}\n'
        f"    return self._cache[pk]\nKeyError: '{key}_{{id}}'"
    )


def _py_refused(client: str, url: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "{site}/urllib3/connection.py", line 203, in _new_conn\n'
        "    sock = connection.create_connection(\n"
        '  File "{site}/urllib3/util/connection.py", line 73, in create_connection\n'
        "    sock.connect(sa)\nConnectionRefusedError: [Errno 111] Connection refused\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n"
        f'  File "/app/{client}/client.py", line @64@, in send\n'
        f'    resp = self.session.post(self.base + "{url}", json=payload, timeout=5)\n'
        '  File "{site}/requests/sessions.py", line 637, in post\n'
        '    return self.request("POST", url, data=data, json=json, **kwargs)\n'
        '  File "{site}/requests/adapters.py", line 519, in send\n'
        "    raise ConnectionError(e, request=request)\n"
        "requests.exceptions.ConnectionError: HTTPConnectionPool(host='{ip}', port=8080): Max retries "
        f"exceeded with url: {url} (Caused by NewConnectionError('<urllib3.connection.HTTPConnection "
        "object at 0x{addr}>: Failed to establish a new connection: [Errno 111] Connection refused'))"
    )


def _node_undefined(cls: str, method: str, file: str) -> str:
    return (
        "TypeError: Cannot read properties of undefined (reading 'id')\n"
        f"    at {cls}.{method} (/app/src/{file}:@42@:17)\n"
        "    at async Promise.all (index {small})\n"
        "    at async OrderController.captureAll (/app/src/orders/controller.js:@18@:5)\n"
        "    at async /app/node_modules/express-async-handler/index.js:3:20"
    )


def _node_connect(code: str, port: int) -> str:
    return (f"Error: connect {code} {{ip}}:{port}\n"
            "    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1555:16)")


def _go_panic(header: str, method: str, line: str) -> str:
    return (
        f"panic: {header}\n\ngoroutine {{gid}} [running]:\n"
        f"github.com/acme/shipping/internal/quote.(*Service).{method}(0x{{addr}}, {{{{0x{{addr}}, 0x10}}}})\n"
        f"\t/build/internal/quote/service.go:@{line}@ +0x{{small}}d\n"
        "github.com/acme/shipping/internal/http.(*Handler).Quote(0x{addr}, {{0xa1b2c0, 0x{addr}}})\n"
        "\t/build/internal/http/handler.go:@131@ +0x1b4\n"
        "net/http.HandlerFunc.ServeHTTP(0x{addr}, {{0xa1b2c0, 0x{addr}}}, 0x{addr})\n"
        "\t/usr/local/go/src/net/http/server.go:2166 +0x29\n"
        "github.com/go-chi/chi/v5.(*Mux).routeHTTP(0x{addr}, {{0xa1b2c0, 0x{addr}}}, 0x{addr})\n"
        "\t/go/pkg/mod/github.com/go-chi/chi/v5@v5.0.12/mux.go:459 +0x2ca\n"
        "net/http.(*conn).serve(0x{addr}, {{0xa1c3d8, 0x{addr}}})\n"
        "\t/usr/local/go/src/net/http/server.go:2092 +0x5d0\n"
        "created by net/http.(*Server).Serve in goroutine 1\n"
        "\t/usr/local/go/src/net/http/server.go:3360 +0x485"
    )


_NIL = ("runtime error: invalid memory address or nil pointer dereference\n"
        "[signal SIGSEGV: segmentation violation code=0x1 addr=0x{small} pc=0x{addr}]")

GROUPS: tuple[Group, ...] = (
    Group("java-npe-capture", "java", "java-npe", ("logstash", "ecs", "otel"),
          "capture of order {id} failed", _java_npe("capture", "getAmount", "142")),
    Group("java-npe-refund", "java", "java-npe", ("logstash", "ecs"),
          "refund of order {id} failed", _java_npe("refund", "getRefundable", "201")),
    Group("java-deadlock", "java", "java-lock", ("logstash", "ecs"), "reservation batch failed",
          _java_wrapped("org.postgresql.util.PSQLException: ERROR: deadlock detected\n  Detail: Process {id} "
                        "waits for ShareLock on transaction {id}; blocked by process {id}.", _PG_FRAMES)),
    Group("java-read-timeout", "java", "java-lock", ("logstash", "ecs"), "reservation batch failed",
          _java_wrapped("java.net.SocketTimeoutException: Read timed out", _SOCKET_FRAMES)),
    Group("py-order-keyerror", "python", "py-keyerror", ("ecs", "otel"), "GET /orders/{id} failed",
          _py_lookup("order_detail", "get_order", "ord")),
    Group("py-customer-keyerror", "python", "py-keyerror", ("ecs", "otel"), "GET /customers/{id} failed",
          _py_lookup("customer_detail", "get_customer", "cus")),
    Group("py-billing-refused", "python", "py-refused", ("ecs",), "charge failed",
          _py_refused("billing", "/charges")),
    Group("py-shipping-refused", "python", "py-refused", ("ecs",), "label purchase failed",
          _py_refused("shipping", "/labels")),
    Group("py-report-zero", "python", "py-report", ("ecs", "otel"), "report {id} failed",
          _DJANGO + '  File "/app/reports/build.py", line @22@, in build\n'
          '    rows = sorted(rows, key=lambda r: r["total"] / r["count"])\n'
          '  File "/app/reports/build.py", line @22@, in <lambda>\n'
          '    rows = sorted(rows, key=lambda r: r["total"] / r["count"])\nZeroDivisionError: division by zero'),
    Group("node-capture-undefined", "node", "node-undefined", ("otel", "ecs"), "capture batch {id} failed",
          _node_undefined("OrderService", "capture", "orders/service.js")),
    Group("node-customer-undefined", "node", "node-undefined", ("otel", "ecs"), "capture batch {id} failed",
          _node_undefined("CustomerService", "load", "customers/service.js")),
    Group("node-redis-refused", "node", "node-connect", ("otel", "ecs"), "cache unavailable",
          _node_connect("ECONNREFUSED", 6379)),
    Group("node-api-timeout", "node", "node-connect", ("otel", "ecs"), "cache unavailable",
          _node_connect("ETIMEDOUT", 443)),
    Group("go-price-nil", "go", "go-nil", ("logstash", "ecs"), "panic serving /quote",
          _go_panic(_NIL, "Price", "77")),
    Group("go-discount-nil", "go", "go-nil", ("logstash", "ecs"), "panic serving /quote",
          _go_panic(_NIL, "Discount", "103")),
    Group("go-parse-index", "go", "go-index", ("logstash", "ecs"), "panic serving /quote",
          _go_panic("runtime error: index out of range [{small}] with length {small}", "Parse", "58")),
    Group("msg-db-refused", "message", "msg-conn", ("native", "ecs"),
          "connection to {ip}:5432 refused after {small} retries (request {hex})"),
    Group("msg-db-reset", "message", "msg-conn", ("native", "ecs"),
          "connection to {ip}:5432 reset by peer after {small} retries (request {hex})"),
    Group("msg-user-missing", "message", "msg-missing", ("native", "ecs"), "user {id} not found"),
    Group("msg-order-missing", "message", "msg-missing", ("native", "ecs"), "order {id} not found"),
    Group("msg-payments-timeout", "message", "msg-timeout", ("native", "logstash"),
          "upstream payments-api timed out after {small}00 ms for /v1/charges/ch_{hex}"),
    Group("msg-receipt-bounce", "message", "msg-mail", ("native", "ecs"),
          "failed to send receipt to user{id}@example.com: 550 mailbox unavailable"),
)
