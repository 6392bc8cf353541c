"""``riverlog acls create|list|delete``: ACL bindings, as ``kafka-acls.sh`` manages them.

A binding names one resource (``--topic``, ``--group``, ``--transactional-id`` or ``--cluster``,
LITERAL by default or ``--pattern-type prefixed``), a principal (``User:alice``, ``User:*``), a
host (``*`` by default), operations and ALLOW (default) or ``--deny``. ``create`` makes one
binding per operation; ``list`` and ``delete`` take the same options as filters, where an option
left out matches anything.
"""

from __future__ import annotations

import argparse
import sys

from ..client.admin import AdminClient
from ..security.acl import (
    ANY_FILTER,
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from .client_common import UsageError, client_options, client_security, print_json, run_command
from .table import format_table

OPERATIONS = [op.name.lower() for op in Operation if op not in (Operation.UNKNOWN, Operation.ANY)]
HEADERS = ["principal", "permission", "operation", "host", "resource_type", "pattern", "name"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = client_options()
    acls = sub.add_parser("acls", help="create, list and delete ACLs",
                          description="Manage ACL bindings (brokers need authorizer.class.name set).")
    actions = acls.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    p = actions.add_parser("create", parents=[common], help="allow (or --deny) operations on a resource")
    _resource_options(p)
    p.add_argument("--principal", required=True, metavar="User:NAME", help="who: User:alice, or User:* for anyone")
    p.add_argument("--operation", action="append", required=True, choices=OPERATIONS, metavar="OP",
                   help=f"repeatable: {', '.join(OPERATIONS)}")
    p.add_argument("--host", default="*", help="the client address it applies to (default: any, *)")
    p.add_argument("--deny", action="store_true", help="a DENY binding (wins over any ALLOW)")
    p.set_defaults(func=lambda a: run_command(lambda: _create(a)))

    for name, text in (("list", "ACL bindings matching the options"), ("delete", "delete the matching bindings")):
        p = actions.add_parser(name, parents=[common], help=text)
        _resource_options(p, filtering=True)
        p.add_argument("--principal", metavar="User:NAME", help="only this principal's bindings")
        p.add_argument("--operation", choices=OPERATIONS, metavar="OP", help="only bindings of this operation")
        p.add_argument("--host", help="only bindings for this host")
        if name == "delete":
            p.add_argument("--all", action="store_true", help="allow deleting with no option given (every ACL)")
            p.set_defaults(func=lambda a: run_command(lambda: _delete(a)))
        else:
            p.set_defaults(func=lambda a: run_command(lambda: _list(a)))


def _resource_options(p: argparse.ArgumentParser, *, filtering: bool = False) -> None:
    which = p.add_mutually_exclusive_group(required=not filtering)
    which.add_argument("--topic", metavar="NAME", help="a topic (* for every topic)")
    which.add_argument("--group", metavar="NAME", help="a consumer group")
    which.add_argument("--transactional-id", metavar="ID", help="a transactional id")
    which.add_argument("--cluster", action="store_true", help="the cluster (admin and inter-broker operations)")
    choices = ["literal", "prefixed"] + (["match", "any"] if filtering else [])
    p.add_argument("--pattern-type", choices=choices, default=None if filtering else "literal",
                   help="how the name matches: literal (default) or prefixed" +
                   ("; match: every binding that applies to the name" if filtering else ""))


def _resource(args: argparse.Namespace) -> tuple[ResourceType, str | None]:
    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.group is not None:
        return ResourceType.GROUP, args.group
    if args.transactional_id is not None:
        return ResourceType.TRANSACTIONAL_ID, args.transactional_id
    if args.cluster:
        return ResourceType.CLUSTER, CLUSTER_NAME
    return ResourceType.ANY, None


def _principal(value: str | None) -> str | None:
    if value is not None and ":" not in value:
        raise UsageError(f"--principal {value!r}: give the type too, as in User:{value}")
    return value


def _filter(args: argparse.Namespace) -> AclFilter:
    resource_type, name = _resource(args)
    pattern = PatternType[args.pattern_type.upper()] if args.pattern_type else (
        PatternType.ANY if name is None else PatternType.LITERAL)
    operation = Operation[args.operation.upper()] if args.operation else Operation.ANY
    return AclFilter(resource_type, name, pattern, _principal(args.principal), args.host, operation, Permission.ANY)


def _show(bindings: list[AclBinding], output: str) -> None:
    rows = [[b.principal, b.permission.name, b.operation.name, b.host, b.resource_type.name, b.pattern_type.name,
             b.resource_name] for b in bindings]
    if output == "json":
        for row in rows:
            print_json(dict(zip(HEADERS, row, strict=True)))
    elif rows:
        print(format_table(HEADERS, rows))


async def _create(args: argparse.Namespace) -> int:
    resource_type, name = _resource(args)
    permission = Permission.DENY if args.deny else Permission.ALLOW
    principal = _principal(args.principal) or ""
    bindings = [AclBinding(resource_type, name or "", PatternType[args.pattern_type.upper()], principal, args.host,
                           Operation[op.upper()], permission) for op in dict.fromkeys(args.operation)]
    async with AdminClient(args.bootstrap_server, security=client_security(args)) as admin:
        await admin.create_acls(bindings)
    _show(bindings, args.output)
    return 0


async def _list(args: argparse.Namespace) -> int:
    async with AdminClient(args.bootstrap_server, security=client_security(args)) as admin:
        bindings = await admin.describe_acls(_filter(args))
    _show(bindings, args.output)
    if not bindings and args.output == "table":
        print("no matching ACLs", file=sys.stderr)
    return 0


async def _delete(args: argparse.Namespace) -> int:
    acl_filter = _filter(args)
    if acl_filter == ANY_FILTER and not args.all:
        raise UsageError("no option narrows the deletion: name a resource, --principal, --operation or --host, "
                         "or pass --all to delete every ACL")
    async with AdminClient(args.bootstrap_server, security=client_security(args)) as admin:
        deleted = await admin.delete_acls([acl_filter])
    _show(deleted, args.output)
    if not deleted and args.output == "table":
        print("no matching ACLs", file=sys.stderr)
    return 0
