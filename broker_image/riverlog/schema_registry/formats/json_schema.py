"""JSON Schema (the REST API's ``schemaType: "JSON"``): drafts 4, 6, 7, 2019-09 and 2020-12.

Parsing: the text must be JSON, its ``$schema`` one of the five drafts (draft 7 when absent, as
Confluent's provider assumes), the schema valid against that draft's meta-schema, and every
``$ref`` resolvable: to the schema itself (``#/definitions/...``, ``#/$defs/...``, anchors) or to
a reference the registry resolved (reference name = the ``$ref`` URL, absolute or relative to the
schema's ``$id``). Nothing is ever fetched: the ``referencing`` registry holds only those texts.

Forms: ``canonical()`` is the JSON compacted with keys in the order given, as Confluent's
``JsonSchema.canonicalString()`` (Jackson re-serializing the tree); ``normalized()`` also sorts
object keys at every level, as its ``normalize()`` (Jackson with ``ORDER_MAP_ENTRIES_BY_KEYS``).

Compatibility (``read_errors``): the reader must accept every document the writer accepts.
The rules and their names follow Confluent's json-schema-provider diff (``Difference.Type``):
properties against open (``additionalProperties`` absent or true), closed (false) and partially
open (an ``additionalProperties`` schema or ``patternProperties``) content models, required,
types, string/number/array/object limits, enums, combined types, ``not``, references. Where a
rule cannot be decided (regular expressions, ``if``/``then``/``else``) the answer is
"incompatible" unless the two are the same. Where Confluent's diff is looser than the data
(e.g. adding ``patternProperties`` to an open model) or stricter (e.g. dropping an ``enum``), this
module answers from the data; docs/schema-registry.md lists those differences.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any
from urllib.parse import urljoin

import jsonschema
import referencing
import referencing.jsonschema
from jsonschema.exceptions import best_match
from jsonschema_specifications import REGISTRY as META_SCHEMAS
from referencing._core import Resolver  # the class only: referencing exports no public name for it
from referencing.exceptions import Unresolvable

from .base import Incompatibility, ParsedSchema, References, SchemaError

__all__ = ["JsonSchema", "parse_json_schema"]


@dataclass(frozen=True)
class _Draft:
    name: str
    validator: Any  # a jsonschema validator class
    spec: referencing.Specification[Any]

    @property
    def modern(self) -> bool:
        """2019-09 and later: ``$ref`` siblings apply, ``dependentRequired``/``dependentSchemas``."""
        return self.name in ("2019-09", "2020-12")


_DRAFT4 = _Draft("4", jsonschema.Draft4Validator, referencing.jsonschema.DRAFT4)
_DRAFT6 = _Draft("6", jsonschema.Draft6Validator, referencing.jsonschema.DRAFT6)
_DRAFT7 = _Draft("7", jsonschema.Draft7Validator, referencing.jsonschema.DRAFT7)
_DRAFT2019 = _Draft("2019-09", jsonschema.Draft201909Validator, referencing.jsonschema.DRAFT201909)
_DRAFT2020 = _Draft("2020-12", jsonschema.Draft202012Validator, referencing.jsonschema.DRAFT202012)
# $schema URLs as written in the wild: http or https, with or without the empty fragment.
_DRAFTS = {
    "json-schema.org/draft-04/schema": _DRAFT4,
    "json-schema.org/draft-06/schema": _DRAFT6,
    "json-schema.org/draft-07/schema": _DRAFT7,
    "json-schema.org/draft/2019-09/schema": _DRAFT2019,
    "json-schema.org/draft/2020-12/schema": _DRAFT2020,
}
_DEFAULT_DRAFT = _DRAFT7


def _draft_named(url: object) -> _Draft | None:
    if not isinstance(url, str):
        return None
    key = re.sub(r"^https?://", "", url.strip()).rstrip("#")
    return _DRAFTS.get(key)


def _draft_of(contents: object, inherited: _Draft, where: str) -> _Draft:
    if not isinstance(contents, dict) or "$schema" not in contents:
        return inherited
    draft = _draft_named(contents["$schema"])
    if draft is None:
        raise SchemaError(f"{where}: unknown $schema {contents['$schema']!r}; one of draft-04, draft-06, "
                          f"draft-07, 2019-09, 2020-12 (http://json-schema.org/draft-07/schema#, ...)")
    return draft


# ---------------------------------------------------------------------------------------------
# Parsing


def _load_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, TypeError) as e:
        raise SchemaError(f"{where}: invalid JSON: {e}") from None


def _check_meta(contents: Any, draft: _Draft, where: str) -> None:
    if not isinstance(contents, dict | bool):
        raise SchemaError(f"{where}: a JSON Schema is an object or a boolean, not {type(contents).__name__}")
    if isinstance(contents, bool) and draft is _DRAFT4:
        raise SchemaError(f"{where}: draft-04 has no boolean schemas")
    # The meta-schema itself is one of jsonschema's own: checking never reaches the network.
    validator = draft.validator(draft.validator.META_SCHEMA)
    error = best_match(validator.iter_errors(contents))
    if error is not None:
        at = "/".join(str(p) for p in error.absolute_path)
        raise SchemaError(f"{where}: not a valid draft {draft.name} JSON Schema at '#/{at}': {error.message}")


@dataclass(frozen=True)
class _Node:
    """A schema at one place: its contents, the resolver for ``$ref`` there (base URI included)
    and the draft that gives its keywords their meaning."""

    schema: Any
    resolver: Resolver[Any]
    draft: _Draft

    def child(self, schema: Any) -> _Node:
        # As jsonschema descends: a subschema with its own $id changes the base URI.
        return _Node(schema, self.resolver.in_subresource(self.draft.spec.create_resource(schema)), self.draft)

    def lookup(self, ref: str) -> _Node:
        resolved = self.resolver.lookup(ref)
        return _Node(resolved.contents, resolved.resolver, _draft_of(resolved.contents, self.draft, ref))

    def accepts(self, instance: Any) -> bool:
        return self.draft.validator(self.schema, _resolver=self.resolver).is_valid(instance)


# Keywords whose value is one schema / a list of schemas / a map of name -> schema. Walking them
# finds every subschema (to check its $refs); everything else (enum, const, default, examples...)
# is data, where a "$ref" key means nothing.
_ONE = ("additionalItems", "additionalProperties", "contains", "contentSchema", "else", "if", "items", "not",
        "propertyNames", "then", "unevaluatedItems", "unevaluatedProperties")
_MANY = ("allOf", "anyOf", "oneOf", "items", "prefixItems")
_MAP = ("$defs", "definitions", "dependentSchemas", "dependencies", "patternProperties", "properties")
_REFS = ("$ref", "$recursiveRef", "$dynamicRef")


def _subschemas(schema: dict[str, Any]) -> Iterator[Any]:
    for key in _ONE:
        if isinstance(schema.get(key), dict | bool):
            yield schema[key]
    for key in _MANY:
        if isinstance(schema.get(key), list):
            yield from schema[key]
    for key in _MAP:
        if isinstance(schema.get(key), dict):
            # dependencies mixes schemas and property lists; the lists are skipped below.
            yield from (v for v in schema[key].values() if isinstance(v, dict | bool))


def _check_refs(node: _Node, where: str) -> None:
    if not isinstance(node.schema, dict):
        return
    for key in _REFS:
        ref = node.schema.get(key)
        if isinstance(ref, str):
            try:
                node.lookup(ref)
            except Unresolvable:
                raise SchemaError(f"{where}: unresolvable {key} {ref!r}: neither in the schema nor among its "
                                  f"references (a reference's name is the URL the $ref uses)") from None
    for sub in _subschemas(node.schema):
        _check_refs(node.child(sub), where)


def parse_json_schema(text: str, references: References) -> JsonSchema:
    """Parse ``text`` as a JSON Schema whose ``$ref``s may name ``references`` (name -> text)."""
    contents = _load_json(text, "schema")
    draft = _draft_of(contents, _DEFAULT_DRAFT, "schema")
    _check_meta(contents, draft, "schema")
    root_id = contents.get("$id" if draft is not _DRAFT4 else "id") if isinstance(contents, dict) else None
    resources: list[tuple[str, referencing.Resource[Any]]] = []
    for name, ref_text in references.items():
        where = f"reference {name!r}"
        ref_contents = _load_json(ref_text, where)
        ref_draft = _draft_of(ref_contents, draft, where)
        _check_meta(ref_contents, ref_draft, where)
        resource = ref_draft.spec.create_resource(ref_contents)
        # Known by its name as given and as resolved against the referring schema's $id
        # ("customer.json" under "https://example.com/order.json"), as Confluent registers them;
        # crawling the registry adds the reference's own $id.
        uris = {name}
        if isinstance(root_id, str):
            uris.add(urljoin(root_id, name))
        resources += [(uri, resource) for uri in uris]
    # No `retrieve`: an unknown URI is Unresolvable, never fetched. The meta-schemas are there
    # for schemas that $ref them.
    registry = META_SCHEMAS.combine(referencing.Registry().with_resources(resources)).crawl()
    root = _Node(contents, registry.resolver_with_root(draft.spec.create_resource(contents)), draft)
    _check_refs(root, "schema")
    for name in references:
        ref_root = root.lookup(name)
        _check_refs(ref_root, f"reference {name!r}")
    _check_terminates(root)
    return JsonSchema(contents, root)


def _check_terminates(root: _Node) -> None:
    # {"anyOf": [{"$ref": "#"}, ...]} refers to itself without looking any deeper into the
    # document: validating anything with it never ends. A few probes find the usual forms.
    validator = root.draft.validator(root.schema, _resolver=root.resolver)
    probes: tuple[Any, ...] = (None, True, 0, "", [], {})
    for probe in probes:
        try:
            # Every error, not the first: a failing keyword before the cycle would hide it.
            list(validator.iter_errors(probe))
        except RecursionError:
            raise SchemaError("schema: it refers to itself without end ($ref cycle through allOf/anyOf/oneOf/not "
                              "or $ref alone): no document can be validated with it") from None


class JsonSchema(ParsedSchema):
    schema_type = "JSON"

    def __init__(self, contents: Any, root: _Node) -> None:
        self._contents = contents
        self._root = root
        self._canonical = json.dumps(contents, separators=(",", ":"), ensure_ascii=False)
        self._normalized = json.dumps(contents, separators=(",", ":"), ensure_ascii=False, sort_keys=True)

    @property
    def draft(self) -> str:
        return self._root.draft.name

    def canonical(self) -> str:
        return self._canonical

    def normalized(self) -> str:
        return self._normalized

    def accepts(self, document: Any) -> bool:
        """Whether ``document`` is valid under this schema (references resolved as parsed)."""
        return self._root.accepts(document)

    def read_errors(self, writer: ParsedSchema) -> list[Incompatibility]:
        if not isinstance(writer, JsonSchema):
            return [Incompatibility("TYPE_CHANGED", "#/", f"a {writer.schema_type} schema is not a JSON Schema")]
        try:
            return _Checker().compare(writer._root, self._root, "#")
        except RecursionError:
            # Nesting deeper than Python's stack: refuse rather than fail the request.
            return [Incompatibility("SCHEMA_TOO_DEEP", "#", "the schemas nest too deeply to be compared")]


# ---------------------------------------------------------------------------------------------
# Compatibility: is every document valid under the writer valid under the reader?

_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_STRING_KW = ("minLength", "maxLength", "pattern")
_NUMBER_KW = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_OBJECT_KW = ("properties", "required", "additionalProperties", "patternProperties", "dependencies",
              "dependentRequired", "dependentSchemas", "minProperties", "maxProperties", "propertyNames",
              "unevaluatedProperties")
_ARRAY_KW = ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
             "minContains", "maxContains", "unevaluatedItems")
_TYPED_KW = ("type", *_STRING_KW, *_NUMBER_KW, *_OBJECT_KW, *_ARRAY_KW)
# Everything a validator acts on; any other key (title, description, default, format, $id,
# $defs, vendor extensions...) is an annotation and changing it is always compatible.
_ASSERTING = frozenset({*_TYPED_KW, "enum", "const", "allOf", "anyOf", "oneOf", "not", "if", *_REFS})

_ANY: dict[str, Any] = {}


def _is_any(schema: Any) -> bool:
    return schema is True or (isinstance(schema, dict) and not _ASSERTING.intersection(schema))


def _types(schema: dict[str, Any]) -> frozenset[str]:
    declared = schema.get("type")
    if declared is None:
        return _TYPES
    return frozenset([declared] if isinstance(declared, str) else declared)


def _covers(types: frozenset[str], t: str) -> bool:
    return t in types or (t == "integer" and "number" in types)


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


class _Checker:
    """One comparison. Pure: the result depends only on the two schemas."""

    def __init__(self) -> None:
        # Pairs being compared further up the stack: meeting one again is a recursive schema
        # ({"$ref": "#"} inside itself) and is assumed compatible; the rest of the walk decides.
        self._in_progress: set[tuple[int, int]] = set()
        # A schema's parts, made once: the same schema must give the same part objects, or the
        # pairs above never repeat and a recursive schema is walked without end.
        self._parts_of: dict[int, tuple[_Node, list[_Node]]] = {}

    # -- entry --------------------------------------------------------------------------------

    def compare(self, w: _Node, r: _Node, path: str) -> list[Incompatibility]:
        w, r = self._deref(w), self._deref(r)
        if _is_any(r.schema) or w.schema is False:
            return []
        if r.schema is False:
            return [_err("TYPE_NARROWED", path, "the reader schema is false and accepts no document at all")]
        key = (id(w.schema), id(r.schema))
        if key in self._in_progress:
            return []
        self._in_progress.add(key)
        try:
            return self._compare(w, r, path)
        finally:
            self._in_progress.discard(key)

    def _deref(self, node: _Node) -> _Node:
        # Draft 4-7: siblings of $ref are ignored. 2019-09+: a lone $ref is followed here; one
        # with siblings stays and its target is one of the parts the schema asserts.
        seen = 0
        while isinstance(node.schema, dict) and seen < 100:
            ref = next((node.schema[k] for k in _REFS if isinstance(node.schema.get(k), str)), None)
            if ref is None:
                break
            if node.draft.modern and _ASSERTING.intersection(node.schema) - set(_REFS):
                break
            node = node.lookup(ref)
            seen += 1
        if node.schema is True or node.schema is None:
            return _Node(_ANY, node.resolver, node.draft)
        return node

    def _compare(self, w: _Node, r: _Node, path: str) -> list[Incompatibility]:
        finite = self._finite_values(w)
        if finite is not None:
            return self._compare_values(finite, r, path)
        errors: list[Incompatibility] = []
        for part in self._parts(r):
            # The reader's parts all hold (an implicit allOf): the writer must fit each.
            errors += self._fit_part(w, part, path)
        return errors

    # -- a schema as the parts it asserts -------------------------------------------------------

    def _parts(self, node: _Node, depth: int = 0) -> list[_Node]:
        """The schema as an allOf of single-minded parts: its typed keywords, its enum, each allOf
        member, its anyOf, its oneOf, its not, its if/then/else, its $ref (2019-09+ siblings)."""
        if not isinstance(node.schema, dict):
            return [node]
        known = self._parts_of.get(id(node.schema))
        if known is None:
            # The node is kept with its parts so that its id is not reused while we run.
            known = self._parts_of[id(node.schema)] = (node, self._make_parts(node, depth))
        return known[1]

    def _make_parts(self, node: _Node, depth: int) -> list[_Node]:
        schema = node.schema
        if depth > 32:
            # allOf: [{"$ref": "#"}] nests without end; past this the part asserts nothing more.
            return [_Node(_ANY, node.resolver, node.draft)]
        parts: list[_Node] = []
        typed = {k: schema[k] for k in _TYPED_KW if k in schema}
        for key in ("enum", "const", "anyOf", "oneOf", "not"):
            if key in schema:
                parts.append(node.child({key: schema[key]}))
        for member in schema.get("allOf", []):
            parts += self._parts(self._deref(node.child(member)), depth + 1)
        if "if" in schema:
            parts.append(node.child({k: schema[k] for k in ("if", "then", "else") if k in schema}))
        for key in _REFS:
            if isinstance(schema.get(key), str):
                parts += self._parts(self._deref(node.lookup(schema[key])), depth + 1)
        if typed or not parts:
            parts.insert(0, _Node(typed, node.resolver, node.draft))
        return parts

    @staticmethod
    def _kind(part: _Node) -> str:
        schema = part.schema
        if schema is False:
            return "false"
        for key in ("enum", "const", "anyOf", "oneOf", "not", "if"):
            if key in schema:
                return key
        return "typed"

    # -- writer fits one reader part -----------------------------------------------------------

    def _fit_part(self, w: _Node, rpart: _Node, path: str) -> list[Incompatibility]:
        kind = self._kind(rpart)
        if kind == "false":
            return [_err("TYPE_NARROWED", path, "the reader schema accepts no document at all")]
        if kind == "if":
            return self._fit_conditional(w, rpart, path)
        wparts = self._parts(w)
        # The writer is an allOf of its parts: fitting any one part into the reader's part is
        # enough. The first failure is reported (the typed part comes first: the usual case).
        first: list[Incompatibility] | None = None
        for wpart in wparts:
            errors = self._fit_one(wpart, rpart, path)
            if not errors:
                return []
            first = errors if first is None else first
        return first or []

    def _fit_one(self, wpart: _Node, rpart: _Node, path: str) -> list[Incompatibility]:
        wkind, rkind = self._kind(wpart), self._kind(rpart)
        if wkind == "false":
            return []
        if wkind in ("enum", "const"):
            # An enum part of the writer (in an allOf, say): its values bound what it writes.
            return self._compare_values(_enum_values(wpart.schema), rpart, path)
        if rkind in ("enum", "const"):
            return [_err("ENUM_ARRAY_NARROWED", f"{path}/{rkind}", f"the reader allows only "
                         f"{_short(_enum_values(rpart.schema))} but the writer allows other values")]
        if wkind in ("anyOf", "oneOf") and rkind in ("anyOf", "oneOf"):
            return self._fit_sums(wpart, rpart, path)
        if wkind in ("anyOf", "oneOf"):
            # Every document of the writer matches one of its branches: each must fit.
            errors: list[Incompatibility] = []
            for i, branch in enumerate(wpart.schema[wkind]):
                errors += self.compare(wpart.child(branch), rpart, f"{path}/{wkind}/{i}")
            return errors
        if rkind in ("anyOf", "oneOf"):
            for branch in rpart.schema[rkind]:
                if not self.compare(wpart, rpart.child(branch), path):
                    return []  # SUM_TYPE_EXTENDED: the reader's union has the writer's type in it
            return [_err("TYPE_CHANGED", f"{path}/{rkind}",
                         f"no branch of the reader's {rkind} accepts everything the writer accepts")]
        if rkind == "not":
            return self._fit_not(wpart, rpart, path)
        if wkind in ("not", "if"):
            return [_err("TYPE_CHANGED", path, f"the writer's {wkind} part does not fit the reader's constraints")]
        return self._typed(wpart, rpart, path)

    def _fit_sums(self, w: _Node, r: _Node, path: str) -> list[Incompatibility]:
        wkind, rkind = self._kind(w), self._kind(r)
        wbranches, rbranches = w.schema[wkind], r.schema[rkind]
        if rkind == "oneOf" and wkind == "anyOf" and len(wbranches) > 1:
            # A document matching two of the writer's branches fails the reader's oneOf.
            return [_err("COMBINED_TYPE_CHANGED", path, "anyOf in the writer became oneOf in the reader")]
        errors: list[Incompatibility] = []
        for i, wb in enumerate(wbranches):
            if not any(not self.compare(w.child(wb), r.child(rb), path) for rb in rbranches):
                kind = "SUM_TYPE_NARROWED" if len(rbranches) < len(wbranches) else "COMBINED_TYPE_SUBSCHEMAS_CHANGED"
                errors.append(_err(kind, f"{path}/{wkind}/{i}",
                                   f"no branch of the reader's {rkind} accepts everything branch {i} of the "
                                   f"writer's {wkind} accepts"))
        return errors

    def _fit_not(self, w: _Node, r: _Node, path: str) -> list[Incompatibility]:
        # The reader rejects what matches its `not`. Compatible when the writer also rejects all
        # of it (the writer's own `not` covers the reader's), or when their types never meet.
        if self._kind(w) == "not":
            if not self.compare(r.child(r.schema["not"]), w.child(w.schema["not"]), f"{path}/not"):
                return []  # NOT_TYPE_NARROWED
            return [_err("NOT_TYPE_EXTENDED", f"{path}/not", "the reader's not rejects documents the writer allows")]
        negated = self._deref(r.child(r.schema["not"]))
        if isinstance(negated.schema, dict) and isinstance(w.schema, dict) and "type" in negated.schema:
            wtypes, ntypes = _types(w.schema), _types(negated.schema)
            if not any(_covers(ntypes, t) or (t == "number" and "integer" in ntypes) for t in wtypes):
                return []
        return [_err("NOT_TYPE_EXTENDED", f"{path}/not", "the reader's not rejects documents the writer allows")]

    def _fit_conditional(self, w: _Node, r: _Node, path: str) -> list[Incompatibility]:
        # if/then/else cannot be compared in general. Compatible when the writer has the same
        # conditional, or when the writer fits both branches whichever way `if` goes.
        wschema = w.schema if isinstance(w.schema, dict) else {}
        mine = {k: wschema[k] for k in ("if", "then", "else") if k in wschema}
        if _same(mine, r.schema):
            return []
        branches = [r.child(r.schema[k]) for k in ("then", "else") if k in r.schema]
        if all(not self.compare(w, b, path) for b in branches):
            return []
        return [_err("CONDITIONAL_CHANGED", f"{path}/if", "the reader's if/then/else differs from the writer's")]

    # -- finite writers (enum, const) -------------------------------------------------------------

    def _finite_values(self, w: _Node) -> list[Any] | None:
        schema = w.schema
        if not isinstance(schema, dict) or not ({"enum", "const"} & set(schema)):
            return None
        # Only the values the whole writer schema allows (its type may rule some out).
        return [v for v in _enum_values(schema) if w.accepts(v)]

    def _compare_values(self, values: list[Any], r: _Node, path: str) -> list[Incompatibility]:
        # The writer can only write these values: validating them against the reader is exact.
        rejected = [v for v in values if not r.accepts(v)]
        if not rejected:
            return []  # ENUM_ARRAY_EXTENDED, or an enum dropped for its type
        rschema = r.schema if isinstance(r.schema, dict) else {}
        if "enum" in rschema or "const" in rschema:
            renum = _enum_values(rschema)
            # Narrowed: the reader's values are some of the writer's; changed: it has others too.
            narrowed = all(any(_same(x, v) for v in values) for x in renum)
            return [_err("ENUM_ARRAY_NARROWED" if narrowed else "ENUM_ARRAY_CHANGED", f"{path}/enum",
                         f"the writer allows {_short(rejected)} which the reader does not")]
        return [_err("TYPE_CHANGED", path, f"the writer allows {_short(rejected)} which the reader rejects")]

    # -- typed parts: type, then the keywords of each type both accept ----------------------------

    def _typed(self, w: _Node, r: _Node, path: str) -> list[Incompatibility]:
        ws, rs = w.schema, r.schema
        wtypes, rtypes = _types(ws), _types(rs)
        errors: list[Incompatibility] = []
        lost = sorted(t for t in wtypes if not _covers(rtypes, t))
        if lost:
            narrowed = rtypes < wtypes or (lost == ["number"] and "integer" in rtypes)
            errors.append(_err("TYPE_NARROWED" if narrowed else "TYPE_CHANGED", f"{path}/type",
                               f"the writer allows {', '.join(lost)} which the reader's type "
                               f"{sorted(rtypes) if len(rtypes) < len(_TYPES) else 'any'} does not"))
        kept = {t for t in wtypes if _covers(rtypes, t)}
        if "string" in kept:
            errors += self._strings(ws, rs, path)
        if kept & {"number", "integer"}:
            errors += self._numbers(w, r, path, integers_only=not ({"number"} & wtypes))
        if "object" in kept:
            errors += self._objects(w, r, path)
        if "array" in kept:
            errors += self._arrays(w, r, path)
        return errors

    @staticmethod
    def _strings(ws: dict[str, Any], rs: dict[str, Any], path: str) -> list[Incompatibility]:
        errors = _limit(ws.get("maxLength"), rs.get("maxLength"), "MAX_LENGTH", f"{path}/maxLength", upper=True)
        errors += _limit(ws.get("minLength"), rs.get("minLength"), "MIN_LENGTH", f"{path}/minLength", upper=False)
        wpat, rpat = ws.get("pattern"), rs.get("pattern")
        if rpat is not None and rpat != wpat:
            # Whether one regular expression matches less than another is not decided here.
            kind = "PATTERN_ADDED" if wpat is None else "PATTERN_CHANGED"
            errors.append(_err(kind, f"{path}/pattern", f"the reader's pattern {rpat!r} is not the writer's {wpat!r}"))
        return errors

    def _numbers(self, w: _Node, r: _Node, path: str, *, integers_only: bool) -> list[Incompatibility]:
        errors: list[Incompatibility] = []
        for upper in (True, False):
            wb, rb = _bound(w, upper, integers_only), _bound(r, upper, integers_only)
            if rb is None:
                continue
            name = ("EXCLUSIVE_" if rb.exclusive_keyword else "") + ("MAXIMUM" if upper else "MINIMUM")
            where = f"{path}/{rb.keyword}"
            if wb is None:
                errors.append(_err(f"{name}_ADDED", where, f"the reader has {rb.keyword} {rb.value}, the writer "
                                                           f"no {'upper' if upper else 'lower'} bound"))
            elif rb.tighter_than(wb, upper):
                errors.append(_err(f"{name}_{'DECREASED' if upper else 'INCREASED'}", where,
                                   f"the reader's {rb.keyword} {rb.value} is tighter than the writer's "
                                   f"{wb.keyword} {wb.value}"))
        wm, rm = w.schema.get("multipleOf"), r.schema.get("multipleOf")
        # Integers are all multiples of 1 (and of 1/2, 1/3...): nothing to check then.
        if rm is not None and not (integers_only and (1 / _fraction(rm)).denominator == 1):
            if wm is None:
                errors.append(_err("MULTIPLE_OF_ADDED", f"{path}/multipleOf", f"the reader has multipleOf {rm}"))
            elif (_fraction(wm) / _fraction(rm)).denominator != 1:
                # The writer's steps must be whole multiples of the reader's (4 -> 2 is fine).
                kind = "MULTIPLE_OF_EXPANDED" if (_fraction(rm) / _fraction(wm)).denominator == 1 else \
                    "MULTIPLE_OF_CHANGED"
                errors.append(_err(kind, f"{path}/multipleOf",
                                   f"the writer's multipleOf {wm} is not a multiple of the reader's {rm}"))
        return errors

    # -- objects -------------------------------------------------------------------------------

    def _objects(self, w: _Node, r: _Node, path: str) -> list[Incompatibility]:
        ws, rs = w.schema, r.schema
        wo, ro = _Obj(w), _Obj(r)
        errors: list[Incompatibility] = []
        for name in sorted(set(wo.props) | set(ro.props)):
            where = f"{path}/properties/{name}"
            if name in wo.props and name in ro.props:
                errors += self.compare(wo.prop(name), ro.prop(name), where)
                for pattern_schema in ro.patterns_for(name):
                    errors += self.compare(wo.prop(name), pattern_schema, where)
            elif name in wo.props:
                errors += self._property_removed(wo, ro, name, where)
            else:
                errors += self._property_added(wo, ro, name, where)
        errors += self._required(wo, ro, path)
        errors += self._additional(wo, ro, path)
        errors += self._dependencies(wo, ro, path)
        errors += _limit(ws.get("maxProperties"), rs.get("maxProperties"), "MAX_PROPERTIES",
                         f"{path}/maxProperties", upper=True)
        errors += _limit(ws.get("minProperties"), rs.get("minProperties"), "MIN_PROPERTIES",
                         f"{path}/minProperties", upper=False)
        if "propertyNames" in rs:
            errors += self._property_names(wo, w, r, path)
        if "unevaluatedProperties" in rs and not _is_any(rs["unevaluatedProperties"]):
            errors += self._unevaluated_properties(wo, ro, path)
        return errors

    def _property_removed(self, wo: _Obj, ro: _Obj, name: str, where: str) -> list[Incompatibility]:
        # Documents of the writer may still carry the property: the reader's content model must
        # take it (we look only at the reader's model: a writer's false property never appears).
        if ro.is_open:
            return []  # PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL
        if self._deref(wo.prop(name)).schema is False:
            return []  # PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL
        covers = ro.covers_for(name)
        if any(c.schema is False for c in covers) or not covers:
            return [_err("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where,
                         "the reader has a closed content model and lacks this property of the writer")]
        errors = [e for c in covers for e in self.compare(wo.prop(name), c, where)]
        if errors:
            return [*errors, _err("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where,
                                  "the reader lacks this property of the writer and its partially open content "
                                  "model does not take the writer's values")]
        return []  # PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL

    def _property_added(self, wo: _Obj, ro: _Obj, name: str, where: str) -> list[Incompatibility]:
        # Documents of the writer may already carry a property of that name, with whatever value
        # the writer's content model allowed there.
        cover = wo.cover_for(name)
        if _is_any(self._deref(cover).schema):
            if _is_any(self._deref(ro.prop(name)).schema):
                return []  # PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
            required = name in ro.required and name not in wo.required
            kind = "REQUIRED" if required else "OPTIONAL"
            return [_err(f"{kind}_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where,
                         "the writer has an open content model: its documents may have this property with "
                         "any value, which the reader's schema for it does not accept")]
        errors = self.compare(cover, ro.prop(name), where)
        if errors:
            return [*errors, _err("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where,
                                  "the writer's partially open content model allows values here that the "
                                  "reader's new property does not")]
        return []  # OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL or ..._IS_COVERED_BY_...

    def _required(self, wo: _Obj, ro: _Obj, path: str) -> list[Incompatibility]:
        errors: list[Incompatibility] = []
        for name in sorted(ro.required - wo.required):
            if name in ro.props and "default" in (self._deref(ro.prop(name)).schema or {}):
                continue  # REQUIRED_..._WITH_DEFAULT_ADDED: the reader fills it in, as Confluent allows
            if name in wo.props or name not in ro.props:
                kind = "REQUIRED_ATTRIBUTE_ADDED"
            elif _is_any(self._deref(wo.cover_for(name)).schema):
                if not _is_any(self._deref(ro.prop(name)).schema):
                    continue  # reported with the property: REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL
                kind = "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
            else:
                kind = "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
            errors.append(_err(kind, f"{path}/required/{name}",
                               "the reader requires a property the writer's documents may lack (and it has no "
                               "default)"))
        return errors

    def _additional(self, wo: _Obj, ro: _Obj, path: str) -> list[Incompatibility]:
        # Names neither side declares: the writer's additionalProperties (or a pattern) against
        # the reader's.
        errors: list[Incompatibility] = []
        where = f"{path}/additionalProperties"
        wa, ra = self._deref(wo.additional), self._deref(ro.additional)
        if not _is_any(ra.schema) and wa.schema is not False:
            if ra.schema is False:
                errors.append(_err("ADDITIONAL_PROPERTIES_REMOVED", where,
                                   "the reader closed its content model: writer documents may have other properties"))
            elif _is_any(wa.schema):
                errors.append(_err("ADDITIONAL_PROPERTIES_NARROWED", where,
                                   "the reader constrains additional properties the writer leaves open"))
            else:
                errors += self.compare(wa, ra, where)
        for pattern in sorted(set(ro.patterns) - set(wo.patterns)):
            sub = self.compare(wa, ro.child(ro.patterns[pattern]), f"{path}/patternProperties/{pattern}")
            if sub:
                errors += [*sub, _err("ADDITIONAL_PROPERTIES_NARROWED", f"{path}/patternProperties/{pattern}",
                                      "the reader's new patternProperties constrain names the writer leaves to "
                                      "its additionalProperties")]
        for pattern in sorted(set(wo.patterns)):
            where = f"{path}/patternProperties/{pattern}"
            if pattern in ro.patterns:
                errors += self.compare(wo.child(wo.patterns[pattern]), ro.child(ro.patterns[pattern]), where)
            elif ra.schema is False:
                errors.append(_err("ADDITIONAL_PROPERTIES_REMOVED", where,
                                   "the reader dropped patternProperties the writer allows and is closed"))
            else:
                sub = self.compare(wo.child(wo.patterns[pattern]), ra, where)
                if sub:
                    errors += [*sub, _err("ADDITIONAL_PROPERTIES_NARROWED", where,
                                          "the reader dropped patternProperties whose values its "
                                          "additionalProperties do not accept")]
        return errors

    def _dependencies(self, wo: _Obj, ro: _Obj, path: str) -> list[Incompatibility]:
        errors: list[Incompatibility] = []
        for name, needed in sorted(ro.dep_required.items()):
            missing = set(needed) - set(wo.dep_required.get(name, ())) - wo.required
            if missing:
                kind = "DEPENDENCY_ARRAY_EXTENDED" if name in wo.dep_required else "DEPENDENCY_ARRAY_ADDED"
                errors.append(_err(kind, f"{path}/{ro.dep_required_kw}/{name}",
                                   f"with {name!r} the reader also requires {sorted(missing)}"))
        for name, schema in sorted(ro.dep_schemas.items()):
            where = f"{path}/{ro.dep_schemas_kw}/{name}"
            if name in wo.dep_schemas:
                errors += self.compare(wo.child(wo.dep_schemas[name]), ro.child(schema), where)
            elif not _is_any(schema):
                errors.append(_err("DEPENDENCY_SCHEMA_ADDED", where,
                                   f"the reader adds a schema dependency on {name!r}"))
        return errors

    def _property_names(self, wo: _Obj, w: _Node, r: _Node, path: str) -> list[Incompatibility]:
        where = f"{path}/propertyNames"
        rnames = r.child(r.schema["propertyNames"])
        if "propertyNames" in w.schema:
            return self.compare(w.child(w.schema["propertyNames"]), rnames, where)
        if wo.is_closed:
            # A closed writer writes only its declared names: check each.
            bad = [n for n in wo.props if not rnames.accepts(n)]
            return [_err("PROPERTY_NAMES_NARROWED", where, f"the reader rejects property names {bad}")] if bad else []
        return self.compare(w.child({"type": "string"}), rnames, where)

    def _unevaluated_properties(self, wo: _Obj, ro: _Obj, path: str) -> list[Incompatibility]:
        # Judged on this part alone (properties the reader declares in allOf/$ref members count
        # as unevaluated here): stricter than the data when they do, never looser.
        where = f"{path}/unevaluatedProperties"
        runeval = ro.child(ro.schema["unevaluatedProperties"])
        errors: list[Incompatibility] = []
        for name in sorted(set(wo.props) - set(ro.props)):
            if not ro.patterns_for(name):
                errors += self.compare(wo.prop(name), runeval, f"{path}/properties/{name}")
        wrest = wo.child(wo.schema["unevaluatedProperties"]) if "unevaluatedProperties" in wo.schema else wo.additional
        rest = self.compare(wrest, runeval, where)
        if rest:
            errors += [*rest, _err("UNEVALUATED_PROPERTIES_NARROWED", where,
                                   "the reader's unevaluatedProperties reject properties the writer allows")]
        return errors

    # -- arrays --------------------------------------------------------------------------------

    def _arrays(self, w: _Node, r: _Node, path: str) -> list[Incompatibility]:
        ws, rs = w.schema, r.schema
        wa, ra = _Arr(w), _Arr(r)
        errors: list[Incompatibility] = []
        wmax = ws.get("maxItems")
        # Position by position: tuple items where given, the rest schema after them.
        for i in range(max(len(wa.tuple), len(ra.tuple))):
            if wmax is not None and i >= wmax:
                break
            wi, ri = wa.at(i), ra.at(i)
            where = f"{path}/{ra.tuple_kw if i < len(ra.tuple) else ra.rest_kw}/{i}"
            sub = self.compare(wi, ri, where)
            if not sub:
                continue
            if i >= len(wa.tuple):  # the reader added a tuple item
                kind = "ITEM_ADDED_TO_OPEN_CONTENT_MODEL" if _is_any(self._deref(wi).schema) else \
                    "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                errors += [*sub, _err(kind, where, "the writer's arrays may have other values at this position")]
            elif i >= len(ra.tuple):  # the reader dropped a tuple item
                kind = "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL" if self._deref(ri).schema is False else \
                    "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                errors += [*sub, _err(kind, where, "the reader does not take the writer's item at this position")]
            else:
                errors += sub
        if wmax is None or wmax > max(len(wa.tuple), len(ra.tuple)):
            where = f"{path}/{ra.rest_kw}"
            wrest, rrest = self._deref(wa.rest), self._deref(ra.rest)
            if ra.rest_absent:
                pass
            elif wa.rest_absent and not _is_any(rrest.schema):
                if ra.tuple:
                    kind = "ADDITIONAL_ITEMS_REMOVED" if rrest.schema is False else "ADDITIONAL_ITEMS_NARROWED"
                    errors.append(_err(kind, where, "the reader constrains items past its tuple; the writer does not"))
                else:
                    errors.append(_err("SCHEMA_ADDED", where, "the reader constrains items; the writer does not"))
            else:
                errors += self.compare(wrest, rrest, where)
        errors += _limit(ws.get("maxItems"), rs.get("maxItems"), "MAX_ITEMS", f"{path}/maxItems", upper=True)
        errors += _limit(ws.get("minItems"), rs.get("minItems"), "MIN_ITEMS", f"{path}/minItems", upper=False)
        if rs.get("uniqueItems") is True and ws.get("uniqueItems") is not True and wmax != 1:
            errors.append(_err("UNIQUE_ITEMS_ADDED", f"{path}/uniqueItems", "the reader requires unique items"))
        errors += self._contains(w, r, path)
        if "unevaluatedItems" in rs and not _is_any(rs["unevaluatedItems"]):
            wu = w.child(ws["unevaluatedItems"]) if "unevaluatedItems" in ws else wa.rest
            sub = self.compare(wu, r.child(rs["unevaluatedItems"]), f"{path}/unevaluatedItems")
            if sub:
                errors += [*sub, _err("UNEVALUATED_ITEMS_NARROWED", f"{path}/unevaluatedItems",
                                      "the reader's unevaluatedItems reject items the writer allows")]
        return errors

    def _contains(self, w: _Node, r: _Node, path: str) -> list[Incompatibility]:
        ws, rs = w.schema, r.schema
        rmin = rs.get("minContains", 1) if r.draft.modern else 1
        errors: list[Incompatibility] = []
        if "contains" in rs and rmin > 0:
            wmin = ws.get("minContains", 1) if w.draft.modern else 1
            if "contains" not in ws or wmin == 0:
                errors.append(_err("CONTAINS_ADDED", f"{path}/contains", "the reader requires an item matching "
                                                                           "its contains; the writer does not"))
            else:
                errors += self.compare(w.child(ws["contains"]), r.child(rs["contains"]), f"{path}/contains")
                errors += _limit(wmin, rmin, "MIN_CONTAINS", f"{path}/minContains", upper=False)
        if "contains" in rs and "maxContains" in rs and r.draft.modern:
            same = "contains" in ws and _same(ws["contains"], rs["contains"]) and w.draft.modern
            wmax = ws.get("maxContains") if same else None
            errors += _limit(wmax, rs["maxContains"], "MAX_CONTAINS", f"{path}/maxContains", upper=True)
        return errors


# ---------------------------------------------------------------------------------------------
# Helpers


def _err(kind: str, path: str, message: str) -> Incompatibility:
    return Incompatibility(kind, path, message)


def _enum_values(schema: dict[str, Any]) -> list[Any]:
    return list(schema["enum"]) if "enum" in schema else [schema["const"]]


def _short(values: list[Any]) -> str:
    text = json.dumps(values)
    return text if len(text) <= 80 else text[:77] + "..."


def _fraction(x: Any) -> Fraction:
    # str(): 0.1 is the decimal 0.1 the schema wrote, not the binary float nearest to it.
    return Fraction(str(x))


def _limit(wval: Any, rval: Any, name: str, where: str, *, upper: bool) -> list[Incompatibility]:
    """A count limit (maxLength, minItems, ...): the reader's may only be looser."""
    if rval is None or (not upper and rval == 0):
        return []
    if wval is None:
        return [_err(f"{name}_ADDED", where, f"the reader has a limit of {rval}; the writer none")]
    if (upper and rval < wval) or (not upper and rval > wval):
        direction = "DECREASED" if upper else "INCREASED"
        return [_err(f"{name}_{direction}", where, f"the reader's {rval} is tighter than the writer's {wval}")]
    return []


@dataclass(frozen=True)
class _Bound:
    value: Fraction
    exclusive: bool
    keyword: str

    @property
    def exclusive_keyword(self) -> bool:
        return self.keyword.startswith("exclusive")

    def tighter_than(self, other: _Bound, upper: bool) -> bool:
        if self.value != other.value:
            return self.value < other.value if upper else self.value > other.value
        return self.exclusive and not other.exclusive


def _bound(node: _Node, upper: bool, integers_only: bool) -> _Bound | None:
    """The tightest upper (or lower) bound a numeric schema sets, from maximum/exclusiveMaximum
    (draft 4: exclusiveMaximum is a flag on maximum). For integers an exclusive bound becomes
    the inclusive integer next to it, so that "maximum 10" equals "exclusiveMaximum 11"."""
    schema = node.schema
    inclusive, exclusive = ("maximum", "exclusiveMaximum") if upper else ("minimum", "exclusiveMinimum")
    candidates: list[_Bound] = []
    if isinstance(schema.get(inclusive), int | float) and not isinstance(schema.get(inclusive), bool):
        flagged = node.draft is _DRAFT4 and schema.get(exclusive) is True
        candidates.append(_Bound(_fraction(schema[inclusive]), flagged, exclusive if flagged else inclusive))
    ex = schema.get(exclusive)
    if isinstance(ex, int | float) and not isinstance(ex, bool):
        candidates.append(_Bound(_fraction(ex), True, exclusive))
    if integers_only:
        candidates = [_integer_bound(b, upper) for b in candidates]
    if not candidates:
        return None
    best = candidates[0]
    for b in candidates[1:]:
        if b.tighter_than(best, upper):
            best = b
    return best


def _integer_bound(b: _Bound, upper: bool) -> _Bound:
    if upper:
        value = math.ceil(b.value) - 1 if b.exclusive else math.floor(b.value)
    else:
        value = math.floor(b.value) + 1 if b.exclusive else math.ceil(b.value)
    return _Bound(Fraction(value), False, b.keyword)


class _Obj:
    """An object schema's content model: declared properties, patternProperties,
    additionalProperties, required, dependencies."""

    def __init__(self, node: _Node) -> None:
        self.node = node
        self.schema: dict[str, Any] = node.schema
        s = self.schema
        self.props: dict[str, Any] = s.get("properties", {})
        self.patterns: dict[str, Any] = s.get("patternProperties", {})
        self.required: set[str] = set(s.get("required", []))
        if "additionalProperties" in s:
            self.additional = node.child(s["additionalProperties"])
        else:
            self.additional = node.child(_ANY)
        self.dep_required: dict[str, list[str]] = {}
        self.dep_schemas: dict[str, Any] = {}
        if node.draft.modern:
            self.dep_required_kw, self.dep_schemas_kw = "dependentRequired", "dependentSchemas"
            self.dep_required = dict(s.get("dependentRequired", {}))
            self.dep_schemas = dict(s.get("dependentSchemas", {}))
        else:
            self.dep_required_kw = self.dep_schemas_kw = "dependencies"
            for name, dep in s.get("dependencies", {}).items():
                if isinstance(dep, list):
                    self.dep_required[name] = dep
                else:
                    self.dep_schemas[name] = dep

    @property
    def is_open(self) -> bool:
        return not self.patterns and _is_any(self.schema.get("additionalProperties", True))

    @property
    def is_closed(self) -> bool:
        return not self.patterns and self.schema.get("additionalProperties") is False

    def child(self, schema: Any) -> _Node:
        return self.node.child(schema)

    def prop(self, name: str) -> _Node:
        return self.node.child(self.props[name])

    def patterns_for(self, name: str) -> list[_Node]:
        return [self.node.child(s) for p, s in self.patterns.items() if _search(p, name)]

    def covers_for(self, name: str) -> list[_Node]:
        """As a reader: every schema an undeclared property of that name must satisfy."""
        return self.patterns_for(name) or [self.additional]

    def cover_for(self, name: str) -> _Node:
        """As a writer: a schema every value it writes under that undeclared name satisfies (the
        first matching pattern; all of them hold, so any one is an upper bound)."""
        matching = self.patterns_for(name)
        return matching[0] if matching else self.additional


class _Arr:
    """An array schema as positions: tuple items (prefixItems, or items as a list before
    2020-12), then one schema for every later item."""

    def __init__(self, node: _Node) -> None:
        self.node = node
        s: dict[str, Any] = node.schema
        self.tuple: list[Any]
        if node.draft is _DRAFT2020:
            self.tuple, self.tuple_kw = list(s.get("prefixItems", [])), "prefixItems"
            rest_kw = "items"
        elif isinstance(s.get("items"), list):
            self.tuple, self.tuple_kw = list(s["items"]), "items"
            rest_kw = "additionalItems"
        else:
            self.tuple, self.tuple_kw = [], "items"
            rest_kw = "items"
        self.rest_kw = rest_kw
        self.rest_absent = rest_kw not in s
        self.rest = node.child(s.get(rest_kw, _ANY))

    def at(self, i: int) -> _Node:
        return self.node.child(self.tuple[i]) if i < len(self.tuple) else self.rest


def _search(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False
