"""A CRD's structural schema applied in-process: defaults, the OpenAPI checks the CRDs use, and the
CEL rules (``x-kubernetes-validations``) through a small interpreter of the CEL subset they are
written in. The unit tier uses it to read every rule and try resources against it without an
API server; the k8s tier (tests/k8s/test_operator.py) checks the same CRDs on a real one, which
also compiles the rules, estimates their cost and has the last word.

Supported CEL: literals (strings, integers, booleans, lists), ``self``/``oldSelf`` and fields,
``! - || && == != < <= > >= in +``, ``has()``, the macros ``all``, ``exists``, ``exists_one``,
``filter``, ``map`` and the methods ``startsWith``, ``endsWith``, ``contains``, ``matches``,
``size``. Anything else is a ``CelError``: the subset grows with the rules.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

TOKEN = re.compile(r"""\s*(?:(?P<num>\d+)|(?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(?P<ident>[A-Za-z_]\w*)|
                   (?P<op>\|\||&&|==|!=|<=|>=|[!<>+\-.,()\[\]]))""", re.VERBOSE)
MACROS = {"all", "exists", "exists_one", "filter", "map"}
METHODS = {"startsWith", "endsWith", "contains", "matches", "size"}

Env = dict[str, Any]
Node = Callable[[Env], Any]


class CelError(Exception):
    """A rule outside the supported subset, a syntax error, or an evaluation error (a missing
    field, a type mismatch)."""


@dataclass
class _Tokens:
    items: list[str]
    pos: int = 0

    def peek(self) -> str | None:
        return self.items[self.pos] if self.pos < len(self.items) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise CelError(f"expected {expected or 'more'}, found {token!r}")
        self.pos += 1
        return token


def tokenize(text: str) -> list[str]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        match = TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise CelError(f"cannot read {text[pos:pos + 20]!r}")
        out.append(match.group().strip())
        pos = match.end()
    return out


def _string(token: str) -> str:
    return re.sub(r"\\(.)", r"\1", token[1:-1])


def _field(value: Any, name: str) -> Any:
    if not isinstance(value, Mapping):
        raise CelError(f"no field {name!r} on {type(value).__name__}")
    if name not in value:
        raise CelError(f"no such key: {name}")
    return value[name]


class _Parser:
    """Precedence climbing over the tokens; each node is a closure over an environment."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _Tokens(tokenize(text))
        # Field chains read from self/oldSelf: ("self", "a", "b") for self.a.b.
        self.paths: list[tuple[str, ...]] = []

    def parse(self) -> Node:
        node = self.or_()
        if self.tokens.peek() is not None:
            raise CelError(f"unexpected {self.tokens.peek()!r} in {self.text!r}")
        return node

    def or_(self) -> Node:
        left = self.and_()
        while self.tokens.peek() == "||":
            self.tokens.take()
            right = self.and_()
            left = (lambda a, b: lambda env: _truth(a(env)) or _truth(b(env)))(left, right)
        return left

    def and_(self) -> Node:
        left = self.rel()
        while self.tokens.peek() == "&&":
            self.tokens.take()
            right = self.rel()
            left = (lambda a, b: lambda env: _truth(a(env)) and _truth(b(env)))(left, right)
        return left

    def rel(self) -> Node:
        left = self.add()
        op = self.tokens.peek()
        if op in ("==", "!=", "<", "<=", ">", ">=", "in"):
            self.tokens.take()
            right = self.add()
            ops: dict[str, Callable[[Any, Any], bool]] = {
                "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
                "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
                "in": lambda a, b: a in b}
            fn = ops[str(op)]
            return lambda env: fn(left(env), right(env))
        return left

    def add(self) -> Node:
        left = self.unary()
        while self.tokens.peek() == "+":
            self.tokens.take()
            right = self.unary()
            left = (lambda a, b: lambda env: a(env) + b(env))(left, right)
        return left

    def unary(self) -> Node:
        if self.tokens.peek() == "!":
            self.tokens.take()
            inner = self.unary()
            return lambda env: not _truth(inner(env))
        if self.tokens.peek() == "-":
            self.tokens.take()
            inner = self.unary()
            return lambda env: -inner(env)
        return self.member()

    def member(self) -> Node:
        node, path = self.primary()
        while self.tokens.peek() in (".", "["):
            if self.tokens.take() == "[":
                index = self.or_()
                self.tokens.take("]")
                node = (lambda n, i: lambda env: n(env)[i(env)])(node, index)
                path = None
                continue
            name = self.tokens.take()
            if self.tokens.peek() == "(":
                node = self.call(node, name)
                path = None
            else:
                node = (lambda n, f: lambda env: _field(n(env), f))(node, name)
                path = (*path, name) if path is not None else None
                if path is not None:
                    self.paths.append(path)
        return node

    def call(self, target: Node, name: str) -> Node:
        self.tokens.take("(")
        if name in MACROS:
            var = self.tokens.take()
            self.tokens.take(",")
            body = self.or_()
            self.tokens.take(")")
            return _macro(name, target, var, body)
        if name not in METHODS:
            raise CelError(f"method {name} is outside the supported subset")
        args = [] if self.tokens.peek() == ")" else self.args()
        self.tokens.take(")")
        methods: dict[str, Callable[..., Any]] = {
            "startsWith": lambda s, p: s.startswith(p), "endsWith": lambda s, p: s.endswith(p),
            "contains": lambda s, p: p in s, "matches": lambda s, p: re.search(p, s) is not None,
            "size": lambda s: len(s)}
        fn = methods[name]
        return lambda env: fn(target(env), *(a(env) for a in args))

    def args(self) -> list[Node]:
        out = [self.or_()]
        while self.tokens.peek() == ",":
            self.tokens.take()
            out.append(self.or_())
        return out

    def primary(self) -> tuple[Node, tuple[str, ...] | None]:
        token = self.tokens.take()
        if token == "(":
            inner = self.or_()
            self.tokens.take(")")
            return inner, None
        if token == "[":
            items = [] if self.tokens.peek() == "]" else self.args()
            self.tokens.take("]")
            return (lambda env: [i(env) for i in items]), None
        if token[0] in "'\"":
            value = _string(token)
            return (lambda env: value), None
        if token.isdigit():
            number = int(token)
            return (lambda env: number), None
        if token in ("true", "false"):
            flag = token == "true"
            return (lambda env: flag), None
        if token == "has":
            self.tokens.take("(")
            start = len(self.paths)
            target = self.member()
            self.tokens.take(")")
            if len(self.paths) == start:
                raise CelError("has() needs a field selection")
            *parent, last = self.paths[-1]
            parent_path = tuple(parent)

            def has(env: Env) -> bool:
                value = env[parent_path[0]]
                for name in parent_path[1:]:
                    value = _field(value, name)
                return isinstance(value, Mapping) and last in value

            del target
            return has, None
        if re.fullmatch(r"[A-Za-z_]\w*", token):
            name = token
            return (lambda env: _variable(env, name)), ((name,) if name in ("self", "oldSelf") else None)
        raise CelError(f"unexpected {token!r}")


def _variable(env: Env, name: str) -> Any:
    if name not in env:
        raise CelError(f"undeclared reference to {name!r}")
    return env[name]


def _truth(value: Any) -> bool:
    if not isinstance(value, bool):
        raise CelError(f"no matching overload: {value!r} is not a bool")
    return value


def _macro(name: str, target: Node, var: str, body: Node) -> Node:
    def items(env: Env) -> Iterator[tuple[Any, Any]]:
        collection = target(env)
        for item in (list(collection) if isinstance(collection, Mapping | list) else _bad(collection)):
            yield item, body({**env, var: item})

    if name == "all":
        return lambda env: all(_truth(r) for _, r in items(env))
    if name == "exists":
        return lambda env: any(_truth(r) for _, r in items(env))
    if name == "exists_one":
        return lambda env: sum(1 for _, r in items(env) if _truth(r)) == 1
    if name == "filter":
        return lambda env: [i for i, r in items(env) if _truth(r)]
    return lambda env: [r for _, r in items(env)]


def _bad(value: Any) -> list[Any]:
    raise CelError(f"cannot iterate {type(value).__name__}")


@dataclass(frozen=True)
class Rule:
    rule: str
    message: str
    paths: tuple[tuple[str, ...], ...]  # self.x.y chains it reads
    transition: bool  # reads oldSelf: checked on updates only
    node: Node


def compile_rule(rule: str, message: str = "") -> Rule:
    parser = _Parser(rule)
    node = parser.parse()
    return Rule(rule, message, tuple(parser.paths), any(p[0] == "oldSelf" for p in parser.paths)
                or "oldSelf" in tokenize(rule), node)


def version_schema(crd: Mapping[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def walk(schema: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every node of a schema with its path (``.spec.config``, ``.spec.plugins[]``, ``.spec.config{}``)."""
    yield path, schema
    for name, child in (schema.get("properties") or {}).items():
        yield from walk(child, f"{path}.{name}")
    if isinstance(schema.get("additionalProperties"), Mapping):
        yield from walk(schema["additionalProperties"], path + "{}")
    if isinstance(schema.get("items"), Mapping):
        yield from walk(schema["items"], path + "[]")


def apply_defaults(schema: Mapping[str, Any], value: Any) -> Any:
    """Structural defaulting as the API server does it: a missing field with a default gets it,
    then its own fields are defaulted."""
    value = copy.deepcopy(value)
    if isinstance(value, dict):
        for name, child in (schema.get("properties") or {}).items():
            if name not in value and "default" in child:
                value[name] = copy.deepcopy(child["default"])
            if name in value:
                value[name] = apply_defaults(child, value[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key in list(value):
                if key not in (schema.get("properties") or {}):
                    value[key] = apply_defaults(extra, value[key])
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        value = [apply_defaults(schema["items"], item) for item in value]
    return value


_MISSING = object()


def _type_ok(schema: Mapping[str, Any], value: Any) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, int | str) and not isinstance(value, bool)
    kind = schema.get("type")
    checks: dict[str, Callable[[Any], bool]] = {
        "object": lambda v: isinstance(v, Mapping), "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool)}
    return kind is None or checks[str(kind)](value)


def errors(schema: Mapping[str, Any], value: Any, old: Any = _MISSING, path: str = "") -> list[str]:
    """What the API server would refuse in ``value`` (already defaulted): ``path: message`` for
    types, required fields, enums, patterns, bounds and CEL rules (transition rules only when
    ``old`` has the field too)."""
    out: list[str] = []
    if not _type_ok(schema, value):
        return [f"{path}: expected {schema.get('type')}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: Unsupported value: {value!r}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{path}: should match {schema['pattern']!r}")
        if len(value) > schema.get("maxLength", len(value)) or len(value) < schema.get("minLength", 0):
            out.append(f"{path}: length out of bounds")
    if isinstance(value, int) and not isinstance(value, bool) and not \
            schema.get("minimum", value) <= value <= schema.get("maximum", value):
        out.append(f"{path}: {value} out of bounds")
    if isinstance(value, Mapping):
        out += [f"{path}.{name}: Required value" for name in schema.get("required") or [] if name not in value]
        if len(value) > schema.get("maxProperties", len(value)):
            out.append(f"{path}: too many properties")
        props = schema.get("properties") or {}
        for name, child in value.items():
            sub = props.get(name, schema.get("additionalProperties") if isinstance(
                schema.get("additionalProperties"), Mapping) else None)
            if sub is not None:
                previous = old.get(name, _MISSING) if isinstance(old, Mapping) else _MISSING
                out += errors(sub, child, previous, f"{path}.{name}")
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", len(value)):
            out.append(f"{path}: too many items")
        for index, item in enumerate(value):
            out += errors(schema.get("items") or {}, item, _MISSING, f"{path}[{index}]")
    for item in schema.get("x-kubernetes-validations") or []:
        rule = compile_rule(item["rule"], item.get("message", ""))
        if rule.transition and old is _MISSING:
            continue
        env = {"self": value} if old is _MISSING else {"self": value, "oldSelf": old}
        try:
            holds = _truth(rule.node(env))
        except CelError as exc:  # the API server refuses with the evaluation error
            out.append(f"{path}: Invalid value: evaluation error: {exc}")
            continue
        if not holds:
            out.append(f"{path}: Invalid value: {item.get('message') or item['rule']}")
    return out


def check(crd: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[str]:
    """Defaults, then every check, of a whole resource (an update when ``old`` is given)."""
    schema = version_schema(crd)
    value = apply_defaults(schema, {k: v for k, v in obj.items() if k in ("spec", "status")})
    previous = _MISSING if old is None else apply_defaults(schema, {k: v for k, v in old.items()
                                                                    if k in ("spec", "status")})
    return errors(schema, value, previous)
